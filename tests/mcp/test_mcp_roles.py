"""What each key may do through the MCP server's streamable HTTP transport: every tool, called with a key of
each role (admin, read-write, read-only), succeeds or is refused exactly as the HTTP routes are (a
read-only key reads, and every tool that writes refuses it with a tool error saying so, changing nothing).
Every tool says whether it writes, and a tool that does not cannot be registered."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from test_mcp_tools import start_http_server

from mcp import Client
from memlane.core.apikeys import ROLE_ADMIN, ROLE_READ_ONLY, ROLE_READ_WRITE, ApiKeys
from memlane.core.memory import Memory
from memlane.interfaces.mcp.server import MemoryTools, add_tools, reads

# Every tool, and whether it writes: the walk below fails when a tool is added or removed without this
# table saying what a read-only key may do with it.
WRITES = {
    "add_memory": True,
    "add_fact": True,
    "update_memory": True,
    "delete_memory": True,
    "end_session": True,
    "search_memory": False,
    "list_memories": False,
    "retention_policy": False,
}
ROLES = (ROLE_ADMIN, ROLE_READ_WRITE, ROLE_READ_ONLY)


@dataclass
class Seeded:
    """A store with one user, a key of each role, and per role the things its calls touch."""

    path: Path
    keys: dict[str, str]
    fact: str  # the fact every role's update_memory corrects
    doomed: dict[str, str]  # per role, the block its delete_memory deletes
    sessions: dict[str, str]  # per role, the session its end_session ends


@pytest.fixture
def seeded(tmp_path: Path) -> Seeded:
    path = tmp_path / "mcp-http.db"  # where start_http_server serves from
    mem = Memory.open(path, embedder="hashing")
    try:
        mem.create_user("alice")
        keys = {role: ApiKeys(mem.store).create("alice", role=role).key for role in ROLES}
        fact = mem.add_facts("alice", ["Alice's locker code is 1234."]).block_ids[0]
        doomed = {role: mem.add_facts("alice", [f"To forget ({role})."]).block_ids[0] for role in ROLES}
        sessions = {role: f"chat-{i}" for i, role in enumerate(ROLES)}
        for session in sessions.values():
            mem.create_session("alice", session)
    finally:
        mem.close()
    return Seeded(path, keys, fact, doomed, sessions)


def calls(seeded: Seeded, role: str) -> dict[str, dict[str, Any]]:
    """One call of every tool, as a key of ``role`` would make it."""
    return {
        "add_memory": {"messages": [{"role": "user", "content": f"Written with the {role} key."}]},
        "add_fact": {"facts": [f"A fact from the {role} key."]},
        "update_memory": {"block_id": seeded.fact, "content": f"Alice's locker code, as the {role} key says."},
        "delete_memory": {"block_id": seeded.doomed[role]},
        "end_session": {"session_id": seeded.sessions[role]},
        "search_memory": {"query": "locker code", "mode": "keyword"},
        "list_memories": {},
        "retention_policy": {},
    }


@pytest.fixture
def mcp_url(seeded: Seeded) -> Iterator[str]:
    proc, port, log = start_http_server(seeded.path.parent)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0, "".join(log)


async def walk(url: str, key: str, todo: dict[str, dict[str, Any]]) -> tuple[dict[str, str | None], dict[str, bool]]:
    """Each tool's refusal (None: it succeeded), and each tool's readOnlyHint as listed."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30))
    out: dict[str, str | None] = {}
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        listed = (await client.list_tools()).tools
        hints = {t.name: bool(t.annotations and t.annotations.read_only_hint) for t in listed}
        for name, args in todo.items():
            res = await client.call_tool(name, args)
            out[name] = " ".join(getattr(c, "text", "") for c in res.content) if res.is_error else None
    return out, hints


def test_every_tool_with_each_role(seeded: Seeded, mcp_url: str) -> None:
    for role in ROLES:
        refused, hints = anyio.run(walk, mcp_url, seeded.keys[role], calls(seeded, role))
        assert set(hints) == set(WRITES), "a tool was added or removed: say in WRITES whether it writes"
        assert hints == {name: not w for name, w in WRITES.items()}  # clients are told too
        if role == ROLE_READ_ONLY:
            assert {n for n, r in refused.items() if r is not None} == {n for n, w in WRITES.items() if w}
            for name, reason in refused.items():
                if reason is not None:
                    assert f"{name} writes, and this key is read-only" in reason, reason
        else:
            assert refused == dict.fromkeys(WRITES), (role, refused)
    mem = Memory.open(seeded.path, embedder="hashing")
    try:
        blocks = {b.id: b for b in mem.list("alice", limit=1000)}
        texts = sorted(b.message for b in blocks.values())
        sessions = {s.session_id: s for s in mem.list_sessions("alice", limit=100).items}
    finally:
        mem.close()
    # The read-only key changed nothing: its block and session are as they were, it added nothing, and the
    # fact holds the last writer's words.
    assert seeded.doomed[ROLE_READ_ONLY] in blocks
    assert not {seeded.doomed[ROLE_ADMIN], seeded.doomed[ROLE_READ_WRITE]} & set(blocks)
    assert sessions[seeded.sessions[ROLE_READ_ONLY]].ended_at is None
    assert sessions[seeded.sessions[ROLE_READ_WRITE]].ended_at is not None
    assert not [t for t in texts if f"the {ROLE_READ_ONLY} key" in t]
    assert blocks[seeded.fact].message == f"Alice's locker code, as the {ROLE_READ_WRITE} key says."


@pytest.mark.parametrize(
    "token",
    [
        # An OpenID Connect token (as the HTTP service takes when configured): this transport takes none.
        "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhbGljZSIsInJvbGUiOiJhbXNfcncifQ.c2lnbmF0dXJl",
        "mlk_000000000000_forged",
    ],
)
def test_tokens_other_than_a_users_key_are_refused(mcp_url: str, token: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    assert httpx.post(mcp_url, json=body, headers=headers).status_code == 401


def test_a_tool_that_does_not_say_whether_it_writes_is_not_registered(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "m.db", embedder="hashing")
    tools = MemoryTools(mem, "alice")

    async def forget_everything() -> str:
        return "gone"

    try:
        server = MCPServer("memlane")
        with pytest.raises(TypeError, match="forget_everything does not say whether it writes"):
            add_tools(server, tools, [forget_everything])
        add_tools(server, tools, [reads(forget_everything)])  # declared: registered
    finally:
        mem.close()
