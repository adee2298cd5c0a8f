"""The Agent Memory answers as bytes on the wire, on every store: a page lists its items before its counts,
and an optional field without a value is left out, not sent as null (clients that compare bodies or read
the first key see the same answer whatever builds it)."""

from __future__ import annotations

import json

from agent_memory_support import AgentApi


def _keys(raw: bytes) -> list[str]:
    return list(json.loads(raw))


def test_a_page_sends_its_items_before_its_counts(api: AgentApi) -> None:
    admin = api.admin
    api.session("ann", "s1")
    assert admin.post("/users/ann/sessions/s1/memory", json={"facts": ["ann drinks tea"]}).status_code == 201
    assert admin.post("/prompts", json={"prompt_id": "p1", "prompt": "say it", "description": "d"}).status_code == 201
    counts = ["count", "total", "limit", "offset"]
    assert _keys(admin.get("/users").content) == ["users", *counts]
    assert _keys(admin.get("/users/ann/sessions").content) == ["sessions", *counts]
    assert _keys(admin.get("/users/ann/memory").content) == ["memory_blocks", *counts]
    assert _keys(admin.get("/prompts").content) == ["prompts", *counts]
    assert _keys(admin.get("/prompts/p1/versions").content) == ["versions", *counts]
    assert _keys(admin.post("/users/ann/sessions/s1/memory/search", json={}).content) == ["memory_blocks", "count"]


def test_an_optional_field_without_a_value_is_left_out(api: AgentApi) -> None:
    admin = api.admin
    api.session("ann", "s1")
    admin.post("/users/ann/sessions/s1/memory", json={"messages": [{"user_content": "hi", "assistant_content": "yo"}]})
    raw = admin.get("/users/ann/memory").content
    block = json.loads(raw)["memory_blocks"][0]
    assert list(block) == [
        "block_id", "user_id", "session_id", "ingested_at", "created_at", "fail_count", "annotations", "contexts",
        "status", "message",
    ]  # fmt: skip
    assert b"null" not in raw
    session = admin.get("/users/ann/sessions/s1").json()
    assert "blocks_ttl" not in session and session["end_time"] is None  # an open session's end_time is sent
    assert "sessions" not in admin.get("/users").json()["users"][0]  # a listed user's session ids are not read
