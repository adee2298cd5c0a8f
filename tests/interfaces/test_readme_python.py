"""The README's Python examples run as written (with the deterministic embedder: what is checked here is the
calls, not the model)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from memlane.core.memory import Memory

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("readme_block", ROOT / ".ci" / "readme_block.py")
assert _spec is not None and _spec.loader is not None
readme_block = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_block)

PYTHON_EXAMPLES = ["Sessions, facts, annotations, TTL and updates"]


@pytest.mark.parametrize("heading", PYTHON_EXAMPLES)
def test_readme_python_example_runs(
    heading: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = readme_block.block((ROOT / "README.md").read_text(encoding="utf-8"), heading)
    opened = Memory.open

    def hashing_open(path: Any, **options: Any) -> Memory:
        return opened(path, **{**options, "embedder": "hashing"})

    monkeypatch.setattr(Memory, "open", hashing_open)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md: {heading}", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out.splitlines()
    # The filter keeps the intake facts only, the allergy first.
    assert out[0] == "['Bob is allergic to peanuts', \"Bob's daughter is called Mia; she is 6\"]"
    assert out[1].startswith("3 [")
    mem = Memory.open(tmp_path / "memlane.db")
    try:
        assert "bob" not in {u.name for u in mem.users()}
    finally:
        mem.close()
