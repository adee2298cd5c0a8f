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


def test_facts_filters_updates_and_ending_a_session(memory: Memory) -> None:
    bobs = memory.add_facts("bob", ["Bob's vault code is 4711."]).block_ids

    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            facts = {"facts": ["Alice is allergic to peanuts."], "session_id": "s1", "annotations": {"topic": "health"}}
            added = result(await client.call_tool("add_fact", facts))
            fact_id = added["block_ids"][0]
            assert memory.get("alice", fact_id).kind.value == "fact"
            await client.call_tool("add_memory", {"messages": ANA, "session_id": "s2", "ttl_s": 3600})

            hits = result(await client.call_tool("search_memory", {"query": "peanuts", "kinds": ["fact"]}))
            assert [h["block_id"] for h in hits] == [fact_id]
            hits = result(await client.call_tool("search_memory", {"query": "Lisbon peanuts", "sessions": ["s2"]}))
            assert hits and {h["session_id"] for h in hits} == {"s2"}
            hits = result(
                await client.call_tool("search_memory", {"query": "peanuts", "annotations": {"topic": "travel"}})
            )
            assert hits == []
            bad = await client.call_tool("search_memory", {"query": "x", "kinds": ["note"]})
            assert "kinds" in error_text(bad)

            updated = result(
                await client.call_tool("update_memory", {"block_id": fact_id, "content": "Alice is allergic to nuts."})
            )
            assert updated["block_id"] == fact_id and updated["message"] == "Alice is allergic to nuts."
            wrong = await client.call_tool("update_memory", {"block_id": fact_id, "user_content": "x"})
            assert "content" in error_text(wrong)
            assert "not found" in error_text(
                await client.call_tool("update_memory", {"block_id": bobs[0], "content": "x"})
            )

            assert "ended" in result(await client.call_tool("end_session", {"session_id": "s1"}))
            again = await client.call_tool("end_session", {"session_id": "s1"})
            assert "ended" in error_text(again)
            refused = await client.call_tool("add_fact", {"facts": ["More."], "session_id": "s1"})
            assert "ended" in error_text(refused)
            assert "ttl_s" in error_text(await client.call_tool("add_fact", {"facts": ["x"], "ttl_s": -1}))

    anyio.run(main)
    assert memory.get("bob", bobs[0]).message == "Bob's vault code is 4711."


def test_search_memory_explains_each_hit_on_request(memory: Memory) -> None:
    memory.add("alice", ANA, session_id="s1", time="2024-06-17T10:00:00Z")
    memory.add("alice", [{"role": "user", "content": "We cooked lentil soup."}], session_id="s2", time="2024-03-01")
    query = {"query": "where did Ana move two weeks ago", "at": "2024-07-01T12:00:00Z"}
    want = memory.search("alice", query["query"], at=query["at"], explain=True)

    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            plain = result(await client.call_tool("search_memory", query))
            hits = result(await client.call_tool("search_memory", {**query, "explain": True}))
            assert all(h["explanation"] is None for h in plain)
            assert [h["block_id"] for h in hits] == [h.block.id for h in want]
            first = hits[0]["explanation"]
            assert first["time_phrases"] == ["two weeks ago"] and first["time_gain"] > 0
            assert {p["retriever"]: p["rank"] for p in first["retrievers"]} == hits[0]["ranks"]

    anyio.run(main)


def test_search_memory_says_which_hit_was_moved_up_and_above_which(memory: Memory) -> None:
    said = [
        ("march", "2024-03-01", "I have three bikes in the garage: a road bike, a gravel bike and a mountain bike."),
        ("june", "2024-06-17", "I just bought my fourth bike, so now I have four bikes in the garage."),
    ]
    for session, when, text in said:
        memory.add("alice", [{"role": "user", "content": text}], session_id=session, time=when)
    query = {"query": "how many bikes do I have in the garage", "at": "2024-07-01T12:00:00Z"}
    want = memory.search("alice", query["query"], at=query["at"])
    assert want[0].supersedes == (want[1].block.id,)

    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            hits = result(await client.call_tool("search_memory", query))
            assert [h["supersedes"] for h in hits] == [list(h.supersedes) for h in want]
            assert hits[1]["superseded_by"] == [hits[0]["block_id"]]

    anyio.run(main)
