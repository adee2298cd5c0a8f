"""The coroutine methods that are made from their synchronous twins (``Awaited``) keep the twins' types:
mypy --strict sees each one's parameters and result, so a wrong call is an error and a right one is typed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

USAGE = """
from typing import assert_type

from memlane import AsyncMemory
from memlane.compat.mem0 import AsyncMemory as Mem0AsyncMemory
from memlane.compat.mem0.memory import Item
from memlane.core.model import AddResult, Hit, Page, Prompt, Session


async def use(mem: AsyncMemory, mem0: Mem0AsyncMemory) -> None:
    assert_type(await mem.add("alice", [{"role": "user", "content": "hi"}], session_id="s"), AddResult)
    assert_type(await mem.search("alice", "where?", k=3), list[Hit])
    assert_type(await mem.list_sessions("alice", limit=5), Page[Session])
    assert_type(await mem.prompts.get("p"), Prompt)
    assert_type(await AsyncMemory.count(mem, "alice"), int)
    assert_type(await mem0.get("m1"), Item | None)
    await mem.add("alice", [], sesion_id="s")  # BAD: a misspelt keyword
    await mem.count(7)  # BAD: user is a str
    await mem0.search("q", top_k="3")  # BAD: top_k is an int
    await mem.prompts.purge()  # BAD: prompt_id is missing
"""


@pytest.mark.slow
def test_mypy_sees_the_synchronous_signatures(tmp_path: Path) -> None:
    usage = tmp_path / "usage.py"
    usage.write_text(USAGE)
    out, err, _ = mypy_api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--strict", "--no-error-summary", str(usage)]
    )
    assert err == ""
    bad = {n for n, line in enumerate(USAGE.splitlines(), 1) if "# BAD" in line}
    flagged = {int(m.group(1)) for m in re.finditer(r"usage\.py:(\d+): error", out)}
    assert flagged == bad, out
