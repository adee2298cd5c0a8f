"""The MCP server through the SDK's own client: in process, over stdio (`memlane mcp --user`), and over
streamable HTTP (`memlane mcp --transport http`) where each request's API key names the user."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from mcp import Client, StdioServerParameters
from memlane.core.apikeys import ApiKeys
from memlane.core.memory import Memory
from memlane.core.retention import RetentionPolicy
from memlane.interfaces.mcp import build_server

TOOLS = {
    "add_memory",
    "add_fact",
    "search_memory",
    "list_memories",
    "update_memory",
    "delete_memory",
    "end_session",
    "retention_policy",
}
CLI = (
    "from memlane.interfaces.cli.app import cli, register_all\n"
    "from memlane.interfaces.cli.serve_cmds import register\n"
    "register_all()\n"
    "'mcp' in cli.commands or register(cli)\n"
    "cli()\n"
)
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


def test_tools_in_process(memory: Memory) -> None:
    bobs = memory.add("bob", [{"role": "user", "content": "Bob's secret: the vault code is 4711."}]).block_ids

    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            added = result(await client.call_tool("add_memory", {"messages": ANA, "time": "2023-05-08T13:56:00Z"}))
            assert added["user"] == "alice" and len(added["block_ids"]) == 2
            hits = result(await client.call_tool("search_memory", {"query": "Where does Ana live?", "k": 5}))
            assert [h["user"] for h in hits] == ["alice"] and "Lisbon" in hits[0]["message"]
            assert {hits[0]["block_id"], *hits[0]["other_perspectives"]} == set(added["block_ids"])
            assert hits[0]["time_annotation"] == "1:56 pm on 8 May, 2023"
            asked = {"query": "what did I hear two days ago", "k": 1, "at": "2023-05-10T12:00:00Z"}
            assert result(await client.call_tool("search_memory", asked))[0]["time_annotation"].endswith("8 May, 2023")
            assert "at" in error_text(await client.call_tool("search_memory", {"query": "x", "at": "someday"}))
            vault = result(await client.call_tool("search_memory", {"query": "vault code 4711", "mode": "keyword"}))
            assert vault == []  # bob's memory is not alice's
            listed = result(await client.call_tool("list_memories", {"limit": 10}))
            assert [b["block_id"] for b in listed] == added["block_ids"]
            deleted = result(await client.call_tool("delete_memory", {"block_id": added["block_ids"][0]}))
            assert added["block_ids"][0] in deleted
            # Errors come back as tool errors the model can read, naming what was wrong.
            assert "not found" in error_text(await client.call_tool("delete_memory", {"block_id": bobs[0]}))
            assert "mode" in error_text(await client.call_tool("search_memory", {"query": "x", "mode": "psychic"}))
            bad = await client.call_tool("add_memory", {"messages": [{"role": "martian", "content": "hi"}]})
            assert "messages[0].role" in error_text(bad)
            # No LLM in this server: a synchronous extraction names the settings that would give it one.
            sync = await client.call_tool("add_memory", {"messages": ANA, "extract": "sync"})
            assert "MEMLANE_LLM_BASE_URL" in error_text(sync) and "Memory(" not in error_text(sync)
            talk = [{"speaker": "Ana", "content": "Hi Bo."}, {"speaker": "Bo", "content": "Hi Ana."}]
            spoken = result(await client.call_tool("add_memory", {"messages": talk, "perspective": "speakers"}))
            deleted = result(await client.call_tool("delete_memory", {"block_id": spoken["block_ids"][0]}))
            deleted = result(await client.call_tool("delete_memory", {"block_id": spoken["block_ids"][1]}))

    anyio.run(main)
    assert [b.id for b in memory.list("bob")] == list(bobs)
    assert len(memory.list("alice")) == 1


def test_retention_policy_is_read_only_over_mcp(memory: Memory) -> None:
    memory.add("alice", ANA)
    memory.add("bob", ANA)
    memory.set_retention(None, RetentionPolicy(max_age_days=90))
    memory.set_retention("bob", RetentionPolicy(max_blocks=10))

    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            own = result(await client.call_tool("retention_policy", {}))
            assert own == {"user": "alice", "policy": {"max_age_days": 90, "max_blocks": None}, "source": "default"}
            assert not {"set_retention", "apply_retention"} & {t.name for t in (await client.list_tools()).tools}
        async with Client(build_server(memory, user="bob")) as client:
            assert result(await client.call_tool("retention_policy", {}))["policy"]["max_blocks"] == 10
        async with Client(build_server(memory, user="carol")) as client:  # no memory yet: the default
            assert result(await client.call_tool("retention_policy", {}))["source"] == "default"

    anyio.run(main)


def test_stdio_transport(tmp_path: Path) -> None:
    env = {**os.environ, "MEMLANE_STORE": str(tmp_path / "stdio.db"), "MEMLANE_EMBEDDER": "hashing"}
    params = StdioServerParameters(command=sys.executable, args=["-c", CLI, "mcp", "--user", "alice"], env=env)

    async def main() -> None:
        with anyio.fail_after(30):
            async with Client(params) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                result(await client.call_tool("add_memory", {"messages": ANA}))
                hits = result(await client.call_tool("search_memory", {"query": "Ana"}))
                assert hits and all(h["user"] == "alice" for h in hits)

    anyio.run(main)
    mem = Memory.open(tmp_path / "stdio.db", embedder="hashing")
    try:
        assert len(mem.list("alice")) == 2
    finally:
        mem.close()


STARTED = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def start_http_server(tmp_path: Path) -> tuple[subprocess.Popen[str], int, list[str]]:
    env = {**os.environ, "MEMLANE_STORE": str(tmp_path / "mcp-http.db"), "MEMLANE_EMBEDDER": "hashing"}
    args = [sys.executable, "-c", CLI, "mcp", "--transport", "http", "--host", "127.0.0.1", "--port", "0"]
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    port: list[int] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if m := STARTED.search(line):
                port.append(int(m.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(30)
    if not port:
        proc.kill()
        raise AssertionError("MCP server did not start:\n" + "".join(lines))
    return proc, port[0], lines


def test_streamable_http_acts_for_the_key_of_each_request(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "mcp-http.db", embedder="hashing")  # the store's keys, as the service makes them
    keys = ApiKeys(mem.store)
    alice_key, bob_key = (keys.create(u).key for u in ("alice", "bob") if mem.create_user(u))
    mem.close()
    proc, port, log = start_http_server(tmp_path)
    url = f"http://127.0.0.1:{port}/mcp"

    async def session(key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(20))
        out: list[Any] = []
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            for name, args in calls:
                res = await client.call_tool(name, args)
                out.append(result(res) if not res.is_error else error_text(res))
        return out

    try:
        added, listed = anyio.run(session, alice_key, [("add_memory", {"messages": ANA}), ("list_memories", {})])
        assert added["user"] == "alice" and {b["user"] for b in listed} == {"alice"}
        steal = {"block_id": added["block_ids"][0]}
        calls = [("list_memories", {}), ("search_memory", {"query": "Ana Lisbon"}), ("delete_memory", steal)]
        bob_view = anyio.run(session, bob_key, calls)
        assert bob_view[0] == [] and bob_view[1] == [] and "not found" in bob_view[2]
        for headers in ({}, {"Authorization": "Bearer mlk_000000000000_forged"}):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            resp = httpx.post(url, json=body, headers={**headers, "Accept": "application/json, text/event-stream"})
            assert resp.status_code == 401, resp.text
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0, "".join(log)


def test_delete_memory_deletes_the_blocks_llm_calls(memory: Memory, tmp_path: Path) -> None:
    """The MCP server's memory (opened as `memlane mcp` opens it, with no LLM) cleans the call log beside the
    store that a worker wrote."""
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.llm import CallLog, ScriptedLLM

    log = CallLog(tmp_path / "mcp.db.calls.db")
    writer = Memory(memory.store, HashingEmbedder(), llm=ScriptedLLM(call_log=log), call_log=log)
    added = writer.add("alice", ANA, extract="sync").block_ids
    assert {r.block_id for r in log.list(10)} == set(added)

    async def main() -> None:
        async with Client(build_server(memory, user="alice")) as client:
            result(await client.call_tool("delete_memory", {"block_id": added[0]}))

    anyio.run(main)
    assert {r.block_id for r in log.list(10)} == {added[1]}
    log.close()
