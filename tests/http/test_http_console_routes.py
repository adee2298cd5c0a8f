"""What the console reads besides the memory routes, on every backend: a block with the other perspectives of
its exchange (and nobody else's), and users found by part of their name (paged, with the total, ``%`` and
``_`` taken literally)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import backend_clients, chat

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore

StoreFactory = Callable[[], Store]
Clients = tuple[httpx.Client, httpx.Client, httpx.Client]


@pytest.fixture
def clients(store_factory: StoreFactory) -> Iterator[Clients]:
    """The admin's client and two users' (alice, bob) over one app on the backend."""
    with backend_clients(store_factory(), {"alice": {}, "bob": {}}) as made:
        yield made


def add(client: httpx.Client, perspective: str, messages: list[dict[str, str]], **extra: Any) -> list[str]:
    res = client.post("/v1/memories", json={"messages": messages, "perspective": perspective, **extra})
    assert res.status_code == 201, res.text
    return list(res.json()["block_ids"])


def others(client: httpx.Client, user: str, block_id: str) -> list[dict[str, Any]]:
    res = client.get(f"/v1/users/{user}/memories/{block_id}")
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["block_id"] == block_id
    return list(body["other_perspectives"])


def test_a_block_lists_the_other_perspectives_of_its_exchange(clients: Clients) -> None:
    admin, alice, bob = clients
    dual = add(alice, "dual", chat("I moved to Lisbon.", "Lovely city!", "My cat came too.", "Nice."))
    assert len(dual) == 4  # two exchanges, two perspectives each
    blocks = [alice.get(f"/v1/memories/{b}").json() for b in dual]
    for block in blocks:
        mates = [b for b in blocks if b["exchange_index"] == block["exchange_index"] and b is not block]
        listed = others(admin, "alice", block["block_id"])
        assert [o["block_id"] for o in listed] == [m["block_id"] for m in mates]
        assert [o["perspective"] for o in listed] == [m["perspective"] for m in mates]
        assert all(o["status"] == "ready" and o["summary"] is None for o in listed)
        assert others(alice, "alice", block["block_id"]) == listed  # the user's own key reads the same

    # The same exchange index and text in a later add is another exchange: not listed.
    again = add(alice, "dual", chat("I moved to Lisbon.", "Lovely city!"))
    assert {o["block_id"] for o in others(admin, "alice", again[0])} == {again[1]}

    # Speakers: one block per speaker, each lists the others, by perspective.
    named = [{"speaker": "Ana", "content": "Hi all."}, {"speaker": "Rui", "content": "Hello Ana."}]
    trio = add(alice, "speakers", named)
    listed = others(admin, "alice", trio[0])
    assert [o["block_id"] for o in listed] == trio[1:]

    # One perspective, a fact: nothing else.
    single = add(alice, "single", chat("Just one side.", "Indeed."))
    assert others(admin, "alice", single[0]) == []
    fact = alice.post("/v1/facts", json={"facts": ["Alice likes figs."]}).json()["block_ids"][0]
    assert others(alice, "alice", fact) == []

    # Isolation: another user's key is refused, and bob's path does not reach alice's block.
    assert bob.get(f"/v1/users/alice/memories/{dual[0]}").status_code == 403
    assert admin.get(f"/v1/users/bob/memories/{dual[0]}").status_code == 404
    assert bob.get(f"/v1/users/bob/memories/{dual[0]}").status_code == 404


def test_an_expired_or_deleted_perspective_is_not_listed(clients: Clients) -> None:
    admin, alice, _ = clients
    first, second = add(alice, "dual", chat("Keep this.", "Sure."))
    assert alice.post("/v1/memories/ttl", json={"ttl_s": 3600, "block_ids": [second]}).status_code == 200
    assert [o["block_id"] for o in others(admin, "alice", first)] == [second]
    alice.delete(f"/v1/memories/{second}")
    assert others(admin, "alice", first) == []
    assert admin.get(f"/v1/users/alice/memories/{second}").status_code == 404


def test_users_by_part_of_their_name(clients: Clients) -> None:
    admin, _, _ = clients
    made = {
        "carol": "Carol Smith",
        "dave_1": "Dave",
        "dave01": "David 100% real",
        "erin": "Erin SMITHSON",
        "frank": None,
    }
    for user, display in made.items():
        body: dict[str, Any] = {"user": user}
        if display is not None:
            body["display_name"] = display
        assert admin.post("/v1/users", json=body).status_code == 201

    def find(**params: Any) -> tuple[list[str], int]:
        res = admin.get("/v1/users", params=params)
        assert res.status_code == 200, res.text
        return [u["user"] for u in res.json()], int(res.headers["X-Total-Count"])

    assert find(q="smith") == (["carol", "erin"], 2)  # the display name, any case
    assert find(q="ALI") == (["alice"], 1)  # the user's id, any case
    assert find(q="dave") == (["dave01", "dave_1"], 2)
    assert find(q="_") == (["dave_1"], 1)  # literal: not "any one character"
    assert find(q="%") == (["dave01"], 1)  # literal: not "anything"
    assert find(q="0%") == (["dave01"], 1)
    assert find(q="\\") == ([], 0)
    assert find(q="nobody") == ([], 0)
    assert find(q="") == (["alice", "bob", "carol", "dave01", "dave_1", "erin", "frank"], 7)  # no rule
    # Paged, the total is every match's.
    assert find(q="a", limit=2) == (["alice", "carol"], 5)
    assert find(q="a", limit=2, offset=2) == (["dave01", "dave_1"], 5)
    assert find(q="a", limit=2, offset=4) == (["frank"], 5)
    # With the exact name: both rules hold.
    assert find(q="smith", name="Carol Smith") == (["carol"], 1)
    assert find(q="erin", name="Carol Smith") == ([], 0)
    assert admin.get("/v1/users", params={"q": "x" * 257}).status_code == 422


def test_users_search_is_the_admins(clients: Clients) -> None:
    _, alice, _ = clients
    assert alice.get("/v1/users", params={"q": "a"}).status_code == 403


def test_the_exchange_is_read_through_the_index(tmp_path: Path) -> None:
    """SQLite's plan: the block by its id, its exchange by blocks_user_session, not a scan of the user."""
    store = SqliteStore(tmp_path / "m.db")
    memory = Memory(store, HashingEmbedder())
    try:
        ids = memory.add("alice", chat("One.", "Two.", "Three.", "Four."), perspective="dual").block_ids
        assert [b.id for b in memory.exchange("alice", ids[1])] == [ids[1], ids[0]]
    finally:
        memory.close()
    with sqlite3.connect(tmp_path / "m.db") as conn:
        conn.execute("ANALYZE")
        plan = " | ".join(
            str(r[3])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT b.id FROM blocks x JOIN users u ON u.id = x.user_id JOIN blocks b "
                "ON b.user_id = x.user_id AND b.conversation_id = x.conversation_id "
                "AND b.session_id = x.session_id AND b.exchange_index = x.exchange_index "
                "WHERE x.id = ? AND u.name = ? AND b.ingest_ts = x.ingest_ts AND b.content_hash = x.content_hash",
                (ids[0], "alice"),
            )
        )
    assert "blocks_user_session" in plan, plan
    assert "SCAN b" not in plan and "SCAN x" not in plan, plan
