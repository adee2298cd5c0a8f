"""The sequence an agent plug-in built on that API's SDK runs (a memory provider for an agent runtime), on
every store, in its HTTP calls: resolve the user (get; on 404 create; on 409 get again), open or reuse a
session (get; on 404 create; an ended one continues under ``<id>~2``), store turns and facts with
provenance annotations asynchronously, recall across sessions with facets and a recency window, find a
block's owning session by id, update it there, and supersede a block of an ended session by adding the new
text to the current session first and then deleting the old block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from agent_memory_support import AgentApi


def resolve_user(client: httpx.Client, user: str) -> dict[str, Any]:
    got = client.get(f"/users/{user}")
    if got.status_code == 404:
        made = client.post("/users", json={"user_id": user, "name": user})
        if made.status_code == 409:
            got = client.get(f"/users/{user}")
        else:
            assert made.status_code == 201, made.text
            return dict(made.json())
    assert got.status_code == 200, got.text
    return dict(got.json())


def open_session(client: httpx.Client, user: str, base: str) -> dict[str, Any]:
    sid = base
    for n in range(2, 10):
        got = client.get(f"/users/{user}/sessions/{sid}")
        if got.status_code == 404:
            made = client.post(f"/users/{user}/sessions", json={"session_id": sid})
            if made.status_code == 201:
                return dict(made.json())
            assert made.status_code == 409
            got = client.get(f"/users/{user}/sessions/{sid}")
        assert got.status_code == 200, got.text
        if not got.json()["end_time"]:
            return dict(got.json())
        sid = f"{base}~{n}"
    raise AssertionError("too many continuations")


def owning_session(client: httpx.Client, user: str, current: str, block_id: str) -> tuple[str, dict[str, Any]]:
    body = {"filters": {"block_ids": [block_id], "session_ids": "all"}}
    found = client.post(f"/users/{user}/sessions/{current}/memory/search", json=body).json()["memory_blocks"]
    assert found, f"block {block_id} not found"
    block = found[0]
    owner = client.get(f"/users/{user}/sessions/{block['session_id']}").json()
    return str(owner["session_id"]), owner


def test_the_plugin_sequence(api: AgentApi) -> None:
    client = api.client(api.user_key("hermes-user"))  # the user exists: get succeeds at once
    assert resolve_user(client, "hermes-user")["id"] == "hermes-user"
    admin = api.admin
    assert resolve_user(admin, "fresh-user")["name"] == "fresh-user"  # 404, then create
    assert resolve_user(admin, "fresh-user")["id"] == "fresh-user"  # then found

    first = open_session(client, "hermes-user", "chat-1")
    assert first["session_id"] == "chat-1" and first["end_time"] is None
    assert open_session(client, "hermes-user", "chat-1")["session_id"] == "chat-1"  # reused
    base = "/users/hermes-user/sessions/chat-1/memory"
    provenance = {"agent": "hermes", "source": "turn"}
    turn = client.post(
        base,
        json={
            "messages": [{"user_content": "I moved to Lisbon.", "assistant_content": "Noted, Lisbon it is."}],
            "annotations": provenance,
            "async_processing": True,
        },
    )
    assert turn.status_code == 201
    fact_add = {"facts": ["User lives in Lisbon."], "annotations": {"agent": "hermes", "source": "agent"}}
    fact = client.post(base, json={**fact_add, "async_processing": True}).json()["block_ids"][0]

    assert client.post("/users/hermes-user/sessions/chat-1/end").status_code == 200
    second = open_session(client, "hermes-user", "chat-1")
    assert second["session_id"] == "chat-1~2"  # the ended session continues under a suffixed id
    current = "chat-1~2"

    since = (datetime.now(UTC) - timedelta(days=7)).replace(tzinfo=None).isoformat()
    recall = {"session_ids": "all", "relevant_k": 5, "annotations": {"agent": "hermes"}, "start_time": since}
    hits = client.post(
        f"/users/hermes-user/sessions/{current}/memory/search", json={"query": "Lisbon", "filters": recall}
    )
    assert hits.status_code == 200
    blocks = hits.json()["memory_blocks"]
    assert {b["session_id"] for b in blocks} == {"chat-1"} and len(blocks) == 2
    for b in blocks:
        shown = b.get("fact") or b.get("summary") or b["message"]["user_content"]
        assert shown and isinstance(b["rel_score"], float) and b["status"] in ("processing", "ready")
    facets = {**recall, "annotations": {"agent": "hermes", "source": "agent"}}
    only_facts = client.post(
        f"/users/hermes-user/sessions/{current}/memory/search", json={"query": "Lisbon", "filters": facets}
    )
    assert [b["block_id"] for b in only_facts.json()["memory_blocks"]] == [fact]

    # updating a block of an ended session: supersede it (add to the current session, then delete the old)
    owner, session = owning_session(client, "hermes-user", current, fact)
    assert owner == "chat-1" and session["end_time"]
    refused = client.put(f"/users/hermes-user/sessions/{owner}/memory/{fact}", json={"fact": "User lives in Porto."})
    assert refused.status_code == 400 and refused.json()["error"] == "SESSION_ALREADY_ENDED"
    new = client.post(
        f"/users/hermes-user/sessions/{current}/memory", json={**fact_add, "facts": ["User lives in Porto."]}
    )
    new_id = new.json()["block_ids"][0]
    gone = client.request("DELETE", f"/users/hermes-user/sessions/{owner}/memory", json={"block_ids": [fact]})
    assert gone.status_code == 200 and gone.json()["deleted_count"] == 1  # deletes reach an ended session

    # updating a block of the open session happens in place, keeping the id and the annotations
    owner, _ = owning_session(client, "hermes-user", current, new_id)
    assert owner == current
    kept = client.put(f"/users/hermes-user/sessions/{owner}/memory/{new_id}", json={"fact": "User lives in Faro."})
    assert kept.json()["block"]["annotations"] == {"agent": "hermes", "source": "agent"}

    listed = client.get("/users/hermes-user/memory", params={"session_ids": "all", "limit": 20}).json()
    texts = sorted(b.get("fact") or b["message"]["user_content"] for b in listed["memory_blocks"])
    assert texts == ["I moved to Lisbon.", "User lives in Faro."]
    assert (
        client.request("DELETE", f"/users/hermes-user/sessions/{current}/memory", json={"block_ids": [new_id]}).json()[
            "deleted_count"
        ]
        == 1
    )
