"""The methods that are made, not written out (``Awaited`` of a synchronous method; the HTTP clients' ``Sync``
and ``Async`` of an endpoint) keep their types: mypy --strict sees each one's parameters and result, so a
wrong call is an error and a right one is typed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[2]

USAGE = """
from typing import assert_type

from memlane import AsyncMemory
from memlane.client import AsyncClient, Client
from memlane.compat.mem0 import AsyncMemory as Mem0AsyncMemory
from memlane.compat.mem0.memory import Item
from memlane.core.model import AddResult, Hit, MemoryBlock, Page, Prompt, Session


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


async def call(client: Client, aclient: AsyncClient) -> None:
    assert_type(client.search("where?", k=3), list[Hit])
    assert_type(await aclient.search("where?", k=3), list[Hit])
    assert_type(client.list(limit=5), list[MemoryBlock])
    assert_type(await aclient.list_sessions(offset=5), Page[Session])
    assert_type(client.delete_session("s1"), int)
    assert_type(await AsyncClient.metrics(aclient), str)
    client.add([], extract="later")  # BAD: not an extract mode
    await aclient.get(block="b1")  # BAD: the parameter is block_id
    client.set_ttl("600")  # BAD: ttl_s is an int
"""


@pytest.mark.slow
def test_mypy_sees_the_synchronous_signatures(tmp_path: Path) -> None:
    usage = tmp_path / "usage.py"
    usage.write_text(USAGE)
    # A cache of its own: the shared one may be older than a source edited within the same second.
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), "--strict"]
    # In a process of its own: mypy raises the interpreter's recursion limit and leaves it raised, which
    # would let later tests parse JSON nested deeper than the server does.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *config, "--no-error-summary", str(usage)],
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout
    assert done.stderr == ""
    bad = {n for n, line in enumerate(USAGE.splitlines(), 1) if "# BAD" in line}
    flagged = {int(m.group(1)) for m in re.finditer(r"usage\.py:(\d+): error", out)}
    assert flagged == bad, out
