"""The examples of docs/integrations/ run as they are written (each page's Python blocks in order, in a fresh
folder and process, with memlane's default embedder), and print what the pages say they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
BLOCK = re.compile(r"(<!-- illustration[^>]*-->\n)?```python\n(.*?)```", re.S)
EXPECTED = {
    "asyncio.md": ["1:56 pm on 8 May, 2023 user: My sister Ana moved to Lisbon.", "['alice', 'bob']"],
    "mem0.md": ["love sci-fi movies", "{'category': 'movies'}", "memlane.db ('vector_store.config.on_disk'"],
    "langgraph.md": ["my cat is called Miso\n[('memories', 'alice')]"],
    "agent-memory.md": ["ready My order hasn't arrived.", "ready Customer is in the EU timezone.", "USER_NOT_FOUND"],
}


def runnable(page: Path) -> str:
    return "\n".join(code for illustration, code in BLOCK.findall(page.read_text()) if not illustration)


def test_every_page_has_a_runnable_example() -> None:
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(EXPECTED)
    assert all(runnable(DOCS / name).strip() for name in EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_page_example_runs(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", runnable(DOCS / name)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    for expected in EXPECTED[name]:
        assert expected in done.stdout, done.stdout
