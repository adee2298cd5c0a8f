"""The README's shell quickstarts run as written, line by line, with `bash -euo pipefail` (as CI's wheel check
runs them): a placeholder a reader must fill in, or a command whose options changed, fails here first."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("readme_block", ROOT / ".ci" / "readme_block.py")
assert _spec is not None and _spec.loader is not None
readme_block = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_block)

CLI_QUICKSTARTS = ["Quickstart: CLI", "Sessions, facts and prompts from the CLI"]


@pytest.mark.parametrize("heading", CLI_QUICKSTARTS)
def test_readme_shell_quickstart_runs(heading: str, tmp_path: Path) -> None:
    script = readme_block.block((ROOT / "README.md").read_text(encoding="utf-8"), heading)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    # The deterministic embedder: what is checked here is the commands, not the model.
    env.update(
        MEMLANE_EMBEDDER="hashing",
        MEMLANE_CACHE_DIR=str(tmp_path / "cache"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{heading} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert "not found" not in done.stderr
