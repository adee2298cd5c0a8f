"""A read-only key tries to write through every door: the MCP server's streamable HTTP transport (each tool
that writes) and the HTTP service's /v1 routes for the same writes. Every attempt is refused (a tool
error naming the key's role; 403) and the store is as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
from http_support import make_service
from mcp.client.streamable_http import streamable_http_client
from redteam_support import served, store_content

from mcp import Client
from memlane.core.apikeys import ROLE_READ_ONLY, ApiKeys
from memlane.core.memory import Memory


def test_a_read_only_key_writes_nothing_over_mcp(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    mem = Memory.open(path, embedder="hashing")
    mem.create_user("alice")
    key = ApiKeys(mem.store).create("alice", role=ROLE_READ_ONLY).key
    fact = mem.add_facts("alice", ["Alice's locker code is 1234."]).block_ids[0]
    mem.create_session("alice", "chat")
    mem.close()
    before = store_content(path)
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("add_memory", {"messages": [{"role": "user", "content": "Planted by a read-only key."}]}),
        ("add_fact", {"facts": ["Planted by a read-only key."]}),
        ("update_memory", {"block_id": fact, "content": "Alice's locker code is 0000."}),
        ("end_session", {"session_id": "chat"}),
        ("delete_memory", {"block_id": fact}),
    ]

    async def attack(url: str) -> list[str]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30))
        out = []
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            for name, args in attempts:
                res = await client.call_tool(name, args)
                assert res.is_error, f"{name} succeeded with a read-only key"
                out.append(" ".join(getattr(c, "text", "") for c in res.content))
            assert not (await client.call_tool("list_memories", {})).is_error  # reads stay open
        return out

    with served(
        ["mcp", "--transport", "http", "--host", "127.0.0.1", "--port", "0"], {"MEMLANE_STORE": str(path)}
    ) as s:
        reasons = anyio.run(attack, f"{s.base}/mcp")
    assert all("read-only" in r for r in reasons), reasons
    assert store_content(path) == before
    mem = Memory.open(path, embedder="hashing")
    try:
        assert mem.get("alice", fact).message == "Alice's locker code is 1234."
        assert mem.get_session("alice", "chat").ended_at is None
    finally:
        mem.close()


def test_the_same_writes_over_http_are_403(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    try:
        svc.memory.create_user("alice")
        key = ApiKeys(svc.memory.store).create("alice", role=ROLE_READ_ONLY).key
        fact = svc.memory.add_facts("alice", ["Alice's locker code is 1234."]).block_ids[0]
        svc.memory.create_session("alice", "chat")
        ro = svc.client(key)
        assert ro.post("/v1/memories", json={"messages": [{"role": "user", "content": "x"}]}).status_code == 403
        assert ro.post("/v1/facts", json={"facts": ["x"]}).status_code == 403
        assert ro.patch(f"/v1/memories/{fact}", json={"content": "0000"}).status_code == 403
        assert ro.post("/v1/sessions/chat/end", json={}).status_code == 403
        assert ro.delete(f"/v1/memories/{fact}").status_code == 403
        assert [b.message for b in svc.memory.list("alice")] == ["Alice's locker code is 1234."]
    finally:
        svc.close()
