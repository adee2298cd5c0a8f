"""A search's explanation over HTTP and through the Python clients: the same as the core's, per hit, on
request only."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
from http_support import BASE_URL, Service, chat

from memlane.client import AsyncClient, Client
from memlane.interfaces.wire.shapes import explanation_json

ASKED = datetime(2024, 7, 1, 12, tzinfo=UTC)
QUERY = "what bike did I buy two weeks ago"


def fill(service: Service) -> str:
    key = service.new_user("alice")
    said = [
        ("june", 14, "I bought a gravel bike with green tyres."),
        ("june", 14, "We rode it along the canal to the bakery."),
        ("march", 120, "My old road bike has a broken chain."),
        ("soup", 60, "We cooked a lentil soup with cumin."),
    ]
    with service.client(key) as alice:
        for session, days, text in said:
            time = (ASKED - timedelta(days=days)).isoformat()
            resp = alice.post(
                "/v1/memories", json={"messages": chat(text, "Noted."), "session_id": session, "time": time}
            )
            assert resp.status_code == 201, resp.text
    return key


def test_search_explains_each_hit_as_the_core_does(service: Service) -> None:
    key = fill(service)
    body = {"query": QUERY, "k": 3, "at": ASKED.isoformat()}
    with service.client(key) as alice:
        plain = alice.post("/v1/search", json=body).json()
        explained = alice.post("/v1/search", json={**body, "explain": True}).json()
    core = service.memory.search("alice", QUERY, 3, at=ASKED, explain=True)
    assert [h["block_id"] for h in explained] == [h["block_id"] for h in plain] == [h.block.id for h in core]
    assert all(h["explanation"] is None for h in plain)
    for got, want in zip(explained, core, strict=True):
        assert want.explanation is not None
        assert got["explanation"] == explanation_json(want.explanation)
        e = got["explanation"]
        assert {p["retriever"]: p["rank"] for p in e["retrievers"]} == got["ranks"]
        parts = e["fused"] + (((e["session_gain"] + e["neighbour_gain"]) + e["words_gain"]) + e["time_gain"])
        assert parts == got["score"]
    june = [h for h in explained if h["session_id"] == "june"]
    assert june and june[0]["explanation"]["time_phrases"] == ["two weeks ago"]
    # the admin's search of a user's memory explains the same way
    with service.admin as admin:
        resp = admin.post("/v1/users/alice/search", json={**body, "explain": True})
    assert resp.status_code == 200 and resp.json() == explained


def test_explain_must_be_a_boolean(service: Service) -> None:
    key = fill(service)
    with service.client(key) as alice:
        resp = alice.post("/v1/search", json={"query": QUERY, "explain": "very"})
    assert resp.status_code == 422
    assert resp.json()["error"]["field"] == "explain"


def test_the_clients_return_the_cores_explanation(service: Service) -> None:
    key = fill(service)
    core = service.memory.search("alice", QUERY, 3, at=ASKED, explain=True)
    with Client(BASE_URL, key, transport=service.transport) as alice:
        got = alice.search(QUERY, 3, at=ASKED, explain=True)
        plain = alice.search(QUERY, 3, at=ASKED)
    assert [h.explanation for h in got] == [h.explanation for h in core]
    assert all(h.explanation is None for h in plain)

    async def main() -> list[object]:
        async with AsyncClient(BASE_URL, key, transport=httpx.ASGITransport(service.app)) as client:
            return [h.explanation for h in await client.search(QUERY, 3, at=ASKED, explain=True)]

    assert asyncio.run(main()) == [h.explanation for h in core]


BIKES = [
    ("march", 120, "I have three bikes in the garage: a road bike, a gravel bike and a mountain bike."),
    ("june", 14, "I just bought my fourth bike, so now I have four bikes in the garage."),
    ("soup", 60, "We cooked a lentil soup with lots of cumin for dinner."),
]
BIKE_QUERY = "how many bikes do I have in the garage"


def test_a_hit_moved_up_names_the_older_blocks_in_every_search_answer(service: Service) -> None:
    key = service.new_user("alice")
    with service.client(key) as alice:
        for session, days, text in BIKES:
            time = (ASKED - timedelta(days=days)).isoformat()
            body = {"messages": chat(text, "Noted."), "session_id": session, "time": time}
            assert alice.post("/v1/memories", json=body).status_code == 201
        hits = alice.post("/v1/search", json={"query": BIKE_QUERY, "k": 3, "at": ASKED.isoformat()}).json()
    newer, older = hits[0], hits[1]
    assert (newer["session_id"], older["session_id"]) == ("june", "march") and newer["explanation"] is None
    assert newer["supersedes"] == [older["block_id"]] and older["superseded_by"] == [newer["block_id"]]
    assert older["supersedes"] == [] and hits[2]["supersedes"] == []
    core = service.memory.search("alice", BIKE_QUERY, 3, at=ASKED)
    assert [h["supersedes"] for h in hits] == [list(h.supersedes) for h in core]
    with Client(BASE_URL, key, transport=service.transport) as client:
        assert [h.supersedes for h in client.search(BIKE_QUERY, 3, at=ASKED)] == [h.supersedes for h in core]

    async def main() -> list[tuple[str, ...]]:
        async with AsyncClient(BASE_URL, key, transport=httpx.ASGITransport(service.app)) as client:
            return [h.supersedes for h in await client.search(BIKE_QUERY, 3, at=ASKED)]

    assert asyncio.run(main()) == [h.supersedes for h in core]
