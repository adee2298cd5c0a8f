"""The memory model's /v1 routes on every backend (SQLite, PostgreSQL, PostgreSQL on Citus): one walk through
users, sessions, facts, exchanges, updates, TTL, filtered search and browse, block status and the prompt
registry, each answer checked, over the app in process."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from http_support import backend_clients, chat

from memlane.core.store.protocol import Store

StoreFactory = Callable[[], Store]


@pytest.fixture
def clients(store_factory: StoreFactory) -> Iterator[tuple[httpx.Client, httpx.Client, httpx.Client]]:
    """The admin's client and two users' (alice, bob) over one app on the backend."""
    teams = {"alice": {"metadata": {"team": "blue"}}, "bob": {"metadata": {"team": "red"}}}
    with backend_clients(store_factory(), teams) as made:
        yield made


def test_the_model_routes_on_every_backend(clients: tuple[httpx.Client, httpx.Client, httpx.Client]) -> None:
    admin, alice, bob = clients
    assert [u["user"] for u in admin.get("/v1/users", params={"metadata": "team=blue"}).json()] == ["alice"]
    dup = admin.post("/v1/users", json={"user": "alice", "exist_ok": False})
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "already_exists"
    assert admin.patch("/v1/users/bob", json={"display_name": "Bob"}).json()["display_name"] == "Bob"

    assert (
        alice.post("/v1/sessions", json={"session_id": "trip", "annotations": {"topic": "travel"}}).status_code == 201
    )
    assert alice.post("/v1/sessions", json={"session_id": "trip"}).status_code == 409
    facts = alice.post(
        "/v1/facts",
        json={"facts": ["Alice flew to Oslo.", "Alice ate salmon."], "session_id": "trip", "annotations": {"k": "a"}},
    ).json()["block_ids"]
    pair = alice.post(
        "/v1/exchanges", json={"exchanges": [{"user_content": "Oslo was cold.", "assistant_content": "Brr!"}]}
    ).json()["block_ids"]
    alice.post("/v1/memories", json={"messages": chat("Oslo trip photos.", "Nice."), "annotations": {"k": "b"}})
    bob.post("/v1/facts", json={"facts": ["Bob flew to Oslo."], "session_id": "trip"})

    def found(body: dict[str, object]) -> set[str]:
        return {h["block_id"] for h in alice.post("/v1/search", json={"query": "Oslo", "k": 20, **body}).json()}

    # Vector search ranks every block, so it returns all that pass; the others return those with the word.
    assert found({"mode": "vector", "sessions": ["trip"]}) == set(facts)
    assert found({"mode": "vector", "kinds": ["exchange"], "annotations": {"k": "b"}}) | set(pair) == found(
        {"mode": "vector", "kinds": ["exchange"]}
    )
    for mode in ("vector", "keyword", "hybrid"):
        assert facts[0] in found({"mode": mode, "sessions": ["trip"]}) <= set(facts), mode
        assert facts[0] in found({"mode": mode, "annotations": {"k": "a"}}) <= set(facts), mode
        assert found({"mode": mode, "block_ids": pair}) == set(pair), mode
        assert found({"mode": mode, "kinds": ["fact"], "ingested_after": "2100-01-01"}) == set(), mode
    page = alice.post("/v1/browse", json={"sessions": ["trip"]}).json()
    assert page["total"] == 2 and {b["block_id"] for b in page["items"]} == set(facts)
    assert alice.post("/v1/browse", json={"kinds": ["exchange"], "order": "event"}).json()["total"] == 1 + 2  # dual

    updated = alice.patch(f"/v1/memories/{facts[0]}", json={"content": "Alice flew to Tromso."}).json()
    assert updated["block_id"] == facts[0] and updated["message"] == "Alice flew to Tromso."
    assert facts[0] not in found({"mode": "keyword"})
    side = alice.patch(f"/v1/memories/{pair[0]}", json={"assistant_content": "Wear a coat!"}).json()
    assert side["sides"][1] == {"role": "assistant", "content": "Wear a coat!"}

    assert alice.post("/v1/memories/ttl", json={"ttl_s": 3600, "session_id": "trip"}).json() == {"changed": 2}
    assert alice.get(f"/v1/memories/{facts[1]}").json()["expires_at"]
    assert alice.get(f"/v1/memories/{facts[1]}/status").json()["status"] == "ready"

    assert alice.post("/v1/sessions/trip/end").json()["ended"] is True
    assert (
        alice.post("/v1/facts", json={"facts": ["x"], "session_id": "trip"}).json()["error"]["code"] == "session_ended"
    )
    assert bob.post("/v1/facts", json={"facts": ["Bob's own."], "session_id": "trip"}).status_code == 201
    assert alice.get("/v1/sessions").json()["total"] == 2  # trip and default
    assert alice.delete("/v1/sessions/trip").json()["blocks_deleted"] == 2
    assert alice.get(f"/v1/memories/{facts[1]}").status_code == 404
    assert bob.get("/v1/sessions/trip").json()["blocks"] == 2

    assert admin.post("/v1/prompts", json={"prompt_id": "p", "text": "Extract places."}).status_code == 201
    assert admin.patch("/v1/prompts/p", json={"text": "Extract places and dates."}).json()["current_version"] == 1
    made = alice.post("/v1/facts", json={"facts": ["Alice saw Bergen."], "prompt": {"prompt_id": "p"}}).json()
    block = alice.get(f"/v1/memories/{made['block_ids'][0]}").json()
    assert (block["prompt_id"], block["prompt_version"]) == ("p", 1)
    assert found({"prompt_id": "p", "prompt_version": 1}) == set(made["block_ids"])
    assert admin.post("/v1/prompts/p/archive").status_code == 204
    assert admin.delete("/v1/prompts/p").status_code == 204
    assert alice.get("/v1/prompts/p").status_code == 404
