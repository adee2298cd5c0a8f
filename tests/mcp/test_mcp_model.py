"""The memory model through the MCP tools, in process: annotations on add_memory and (as the core grows
them) facts, filtered search, updates and ending a session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult

from mcp import Client
from memlane.core.memory import Memory
from memlane.interfaces.mcp import build_server

ANA = [
    {"role": "user", "content": "My sister Ana moved to Lisbon."},
    {"role": "assistant", "content": "Lisbon is lovely!"},
]


def result(res: CallToolResult) -> Any:
    assert not res.is_error, res.content
    structured = res.structured_content
    assert structured is not None
    return structured.get("result", structured)


def error_text(res: CallToolResult) -> str:
    assert res.is_error
    return " ".join(getattr(c, "text", "") for c in res.content)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing", durability="normal")
    yield mem
    mem.close()


def test_add_memory_with_annotations(memory: Memory) -> None:
    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            added = result(await client.call_tool("add_memory", {"messages": ANA, "annotations": {"topic": "family"}}))
            assert all(memory.get("alice", b).annotations == {"topic": "family"} for b in added["block_ids"])
            bad = await client.call_tool("add_memory", {"messages": ANA, "annotations": {"topic": 3}})
            assert "annotations" in error_text(bad)

    anyio.run(main)
