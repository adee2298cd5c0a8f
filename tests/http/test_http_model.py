"""The memory model over HTTP /v1: annotations on adds, and (as the core grows them) users with names and
metadata, sessions, facts, updates, TTL, filtered search and the prompt registry. Every bad field is a 4xx
naming it, never a 500."""

from __future__ import annotations

import time
from typing import Any

import pytest
from http_support import Service, chat

from memlane.core.llm import ScriptedLLM


def test_add_keeps_annotations_on_every_block(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    body = {"messages": chat("I fly to Oslo.", "Have fun!"), "annotations": {"topic": "travel", "source": "chat"}}
    resp = alice.post("/v1/memories", json=body)
    assert resp.status_code == 201, resp.text
    for block_id in resp.json()["block_ids"]:
        assert alice.get(f"/v1/memories/{block_id}").json()["annotations"] == {"topic": "travel", "source": "chat"}


def test_bad_annotations_name_the_field(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    for given, field in (
        ({"topic": 3}, "annotations.topic"),
        (["topic"], "annotations"),
        ({f"k{i}": "v" for i in range(65)}, "annotations"),
    ):
        resp = alice.post("/v1/memories", json={"messages": chat("x"), "annotations": given})
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == field, resp.json()
    assert alice.get("/v1/memories").json() == []  # nothing half-written


def test_users_with_display_name_and_metadata(service: Service) -> None:
    admin = service.admin
    body = {"user": "alice", "display_name": "Alice L.", "metadata": {"team": "blue", "tier": "gold"}}
    assert admin.post("/v1/users", json=body).status_code == 201
    assert admin.post("/v1/users", json={"user": "bob", "metadata": {"team": "blue"}}).status_code == 201
    assert admin.post("/v1/users", json={"user": "carol", "metadata": {"team": "red"}}).status_code == 201
    # Asked to create an existing user: 409, distinct from other conflicts; the default still confirms it.
    again = admin.post("/v1/users", json={"user": "alice", "exist_ok": False})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_exists"
    assert admin.post("/v1/users", json={"user": "alice"}).status_code == 200

    alice = admin.get("/v1/users/alice").json()
    assert alice["display_name"] == "Alice L." and alice["metadata"] == {"team": "blue", "tier": "gold"}
    assert alice["sessions"] == 0 and alice["last_activity"] is None

    blue = admin.get("/v1/users", params={"metadata": "team=blue"})
    assert sorted(u["user"] for u in blue.json()) == ["alice", "bob"] and blue.headers["X-Total-Count"] == "2"
    both = admin.get("/v1/users", params=[("metadata", "team=blue"), ("metadata", "tier=gold")]).json()
    assert [u["user"] for u in both] == ["alice"]
    assert [u["user"] for u in admin.get("/v1/users", params={"name": "Alice L."}).json()] == ["alice"]
    paged = admin.get("/v1/users", params={"limit": 1, "offset": 1})
    assert len(paged.json()) == 1 and paged.headers["X-Total-Count"] == "3"

    key = admin.post("/v1/users/alice/keys", json={}).json()["key"]
    service.client(key).post("/v1/memories", json={"messages": chat("Hi.", "Hello."), "session_id": "s1"})
    service.client(key).post("/v1/facts", json={"facts": ["A fact."], "session_id": "s2"})
    alice = admin.get("/v1/users/alice").json()
    assert (alice["blocks"], alice["sessions"]) == (3, 2) and alice["last_activity"]
    patched = admin.patch("/v1/users/alice", json={"metadata": {"team": "red"}}).json()
    assert patched["metadata"] == {"team": "red"} and patched["display_name"] == "Alice L."  # left out: kept
    bad = admin.get("/v1/users", params={"metadata": "team"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "metadata"
    assert admin.get("/v1/users/nobody").status_code == 404


def test_a_user_key_reaches_only_its_own_user(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    service.new_user("bob")
    assert alice.get("/v1/users/alice").status_code == 200
    assert alice.get("/v1/users/bob").status_code == 403
    assert alice.patch("/v1/users/bob", json={"display_name": "x"}).status_code == 403
    assert alice.get("/v1/users").status_code == 403


def test_sessions_lifecycle(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    body = {
        "session_id": "trip",
        "started_at": "2024-03-01T09:00:00Z",
        "annotations": {"topic": "travel"},
        "metadata": {"city": "Oslo"},
        "default_ttl_s": 3600,
    }
    created = alice.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    s = created.json()
    assert s["session_id"] == "trip" and s["started_at"].startswith("2024-03-01T09:00")
    assert s["annotations"] == {"topic": "travel"} and s["metadata"] == {"city": "Oslo"} and s["ended"] is False
    dup = alice.post("/v1/sessions", json={"session_id": "trip"})
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "already_exists"
    assert alice.post("/v1/sessions", json={"session_id": "trip", "exist_ok": True}).status_code == 200
    assert alice.post("/v1/sessions", json={"session_id": "work"}).status_code == 201

    added = alice.post("/v1/memories", json={"messages": chat("We land at noon."), "session_id": "trip"}).json()
    got = alice.get(f"/v1/memories/{added['block_ids'][0]}").json()
    assert got["expires_at"] is not None  # the session's default TTL
    page = alice.get("/v1/sessions", params={"limit": 1}).json()
    assert page["total"] == 2 and len(page["items"]) == 1
    assert alice.get("/v1/sessions/trip").json()["blocks"] == len(added["block_ids"])

    patched = alice.patch("/v1/sessions/trip", json={"metadata": {"city": "Bergen"}}).json()
    assert patched["metadata"] == {"city": "Bergen"} and patched["annotations"] == {"topic": "travel"}

    ended = alice.post("/v1/sessions/trip/end")
    assert ended.status_code == 200 and ended.json()["ended"] is True and ended.json()["ended_at"]
    twice = alice.post("/v1/sessions/trip/end")
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "session_ended"
    refused = alice.post("/v1/memories", json={"messages": chat("One more."), "session_id": "trip"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "session_ended"
    assert alice.patch("/v1/sessions/trip", json={"metadata": {}}).status_code == 409
    # Its blocks stay readable and searchable.
    assert alice.get(f"/v1/memories/{added['block_ids'][0]}").status_code == 200
    hits = alice.post("/v1/search", json={"query": "land at noon", "sessions": ["trip"]}).json()
    assert hits and all(h["session_id"] == "trip" for h in hits)

    deleted = alice.delete("/v1/sessions/trip").json()
    assert deleted == {"user": "alice", "session_id": "trip", "blocks_deleted": len(added["block_ids"])}
    assert alice.get("/v1/sessions/trip").status_code == 404
    assert alice.get(f"/v1/memories/{added['block_ids'][0]}").status_code == 404


def test_sessions_are_per_user(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    bob = service.client(service.new_user("bob"))
    assert alice.post("/v1/sessions", json={"session_id": "s1"}).status_code == 201
    assert bob.get("/v1/sessions/s1").status_code == 404
    assert bob.post("/v1/sessions/s1/end").status_code == 404
    assert bob.delete("/v1/sessions/s1").status_code == 404
    assert bob.post("/v1/sessions", json={"session_id": "s1"}).status_code == 201  # bob's own, another session
    assert bob.get("/v1/sessions").json()["total"] == 1
    assert service.admin.get("/v1/sessions").status_code == 403  # the admin key holds no sessions


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"session_id": ""}, "session_id"),
        ({"session_id": "s", "default_ttl_s": -1}, "default_ttl_s"),
        ({"session_id": "s", "default_ttl_s": True}, "default_ttl_s"),
        ({"session_id": "s", "metadata": [1]}, "metadata"),
        ({"session_id": "s", "annotations": {"1bad": "x"}}, "annotations"),
        ({"session_id": "s", "started_at": "someday"}, "started_at"),
    ],
)
def test_bad_session_fields_name_the_field(service: Service, body: dict[str, Any], field: str) -> None:
    alice = service.client(service.new_user("alice"))
    resp = alice.post("/v1/sessions", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"].startswith(field), resp.json()
    assert alice.get("/v1/sessions").json()["total"] == 0


def test_facts_and_exchanges(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    facts = alice.post(
        "/v1/facts",
        json={"facts": ["Alice is allergic to peanuts.", "Alice's sister is Ana."], "annotations": {"topic": "bio"}},
    )
    assert facts.status_code == 201, facts.text
    fact_ids = facts.json()["block_ids"]
    assert len(fact_ids) == 2
    fact = alice.get(f"/v1/memories/{fact_ids[0]}").json()
    assert fact["kind"] == "fact" and fact["message"] == "Alice is allergic to peanuts." and fact["sides"] == []

    pairs = [{"user_content": "I fly to Oslo.", "assistant_content": "Safe travels!"}, {"user_content": "Noted."}]
    ex = alice.post("/v1/exchanges", json={"exchanges": pairs, "session_id": "s1"})
    assert ex.status_code == 201, ex.text
    assert len(ex.json()["block_ids"]) == 2
    block = alice.get(f"/v1/memories/{ex.json()['block_ids'][0]}").json()
    assert block["kind"] == "exchange"
    assert block["sides"] == [
        {"role": "user", "content": "I fly to Oslo."},
        {"role": "assistant", "content": "Safe travels!"},
    ]
    hits = alice.post("/v1/search", json={"query": "peanuts allergy", "kinds": ["fact"]}).json()
    assert hits and {h["kind"] for h in hits} == {"fact"}

    empty = alice.post("/v1/exchanges", json={"exchanges": [{"user_content": "", "assistant_content": ""}]})
    assert empty.status_code == 422 and "exchanges" in empty.json()["error"]["field"]
    assert alice.post("/v1/facts", json={"facts": []}).json()["error"]["field"] == "facts"
    assert alice.post("/v1/facts", json={"facts": ["x"], "ttl_s": -5}).json()["error"]["field"] == "ttl_s"


def test_update_in_place(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    fact_id = alice.post("/v1/facts", json={"facts": ["Alice lives in Ghent."]}).json()["block_ids"][0]
    ex_id = alice.post(
        "/v1/exchanges", json={"exchanges": [{"user_content": "I own a cat.", "assistant_content": "Cute!"}]}
    ).json()["block_ids"][0]

    updated = alice.patch(f"/v1/memories/{fact_id}", json={"content": "Alice lives in Porto.", "ttl_s": 60})
    assert updated.status_code == 200, updated.text
    u = updated.json()
    assert u["block_id"] == fact_id and u["message"] == "Alice lives in Porto." and u["updated_at"]
    assert u["ttl_s"] == 60 and u["expires_at"]
    assert alice.post("/v1/search", json={"query": "Ghent", "mode": "keyword"}).json() == []
    assert [h["block_id"] for h in alice.post("/v1/search", json={"query": "Porto", "mode": "keyword"}).json()] == [
        fact_id
    ]

    # One side given: the other is kept. PUT is the same as PATCH.
    side = alice.put(f"/v1/memories/{ex_id}", json={"user_content": "I own two cats.", "annotations": {"pet": "cat"}})
    assert side.status_code == 200, side.text
    assert side.json()["sides"] == [
        {"role": "user", "content": "I own two cats."},
        {"role": "assistant", "content": "Cute!"},
    ]
    assert side.json()["annotations"] == {"pet": "cat"}

    wrong = alice.patch(f"/v1/memories/{fact_id}", json={"user_content": "x"})
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "content"
    both = alice.patch(f"/v1/memories/{ex_id}", json={"content": "x", "user_content": "y"})
    assert both.status_code == 422
    assert alice.patch("/v1/memories/nope", json={"content": "x"}).status_code == 404
    bob = service.client(service.new_user("bob"))
    assert bob.patch(f"/v1/memories/{fact_id}", json={"content": "hacked"}).status_code == 404
    assert alice.get(f"/v1/memories/{fact_id}").json()["message"] == "Alice lives in Porto."


def test_update_into_an_ended_session_is_refused(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    fact_id = alice.post("/v1/facts", json={"facts": ["A fact."], "session_id": "s1"}).json()["block_ids"][0]
    assert alice.post("/v1/sessions/s1/end").status_code == 200
    resp = alice.patch(f"/v1/memories/{fact_id}", json={"content": "Changed."})
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "session_ended"
    assert alice.get(f"/v1/memories/{fact_id}").json()["message"] == "A fact."


def test_ttl_hides_expired_blocks_at_once(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    keep = alice.post("/v1/facts", json={"facts": ["Keep me."], "session_id": "a"}).json()["block_ids"]
    gone = alice.post("/v1/facts", json={"facts": ["Forget me soon."], "session_id": "b"}).json()["block_ids"]
    changed = alice.post("/v1/memories/ttl", json={"ttl_s": 3600, "session_id": "b"}).json()
    assert changed == {"changed": 1}
    assert alice.get(f"/v1/memories/{gone[0]}").json()["ttl_s"] == 3600
    assert alice.post("/v1/memories/ttl", json={"ttl_s": 0, "block_ids": keep}).json() == {"changed": 1}
    assert alice.post("/v1/memories/ttl", json={"ttl_s": 5, "block_ids": keep, "session_id": "a"}).status_code == 422
    assert alice.post("/v1/memories/ttl", json={"ttl_s": "5"}).json()["error"]["field"] == "ttl_s"


def test_filtered_search_and_browse(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    ids = {}
    for session, topic, text in (
        ("s1", "travel", "I flew to Oslo in May."),
        ("s2", "travel", "I took the train to Oslo."),
        ("s2", "food", "I ate salmon in Oslo."),
    ):
        body = {"facts": [text], "session_id": session, "annotations": {"topic": topic}}
        ids[text] = alice.post("/v1/facts", json=body).json()["block_ids"][0]

    def found(**filters: Any) -> set[str]:
        hits = alice.post("/v1/search", json={"query": "Oslo", "k": 10, **filters}).json()
        return {h["message"] for h in hits}

    assert len(found()) == 3
    assert found(sessions=["s2"]) == {"I took the train to Oslo.", "I ate salmon in Oslo."}
    assert found(annotations={"topic": "travel"}) == {"I flew to Oslo in May.", "I took the train to Oslo."}
    assert found(annotations={"topic": "travel"}, sessions=["s2"]) == {"I took the train to Oslo."}
    assert found(annotations={"topic": "food"}, annotation_filter="post") == {"I ate salmon in Oslo."}
    assert found(block_ids=[ids["I flew to Oslo in May."]]) == {"I flew to Oslo in May."}
    assert found(ingested_after="2100-01-01") == set()
    assert found(kinds=["exchange"]) == set()

    page = alice.post("/v1/browse", json={"annotations": {"topic": "travel"}, "limit": 1}).json()
    assert page["total"] == 2 and len(page["items"]) == 1
    # Newest written first.
    assert page["items"][0]["message"] == "I took the train to Oslo."
    everything = alice.post("/v1/browse", json={}).json()
    assert everything["total"] == 3

    for body, field in (
        ({"query": "x", "annotation_filter": "middle"}, "annotation_filter"),
        ({"query": "x", "kinds": ["note"]}, "kinds"),
        ({"query": "x", "prompt_version": 1}, "prompt_version"),
        ({"query": "x", "ingested_after": "someday"}, "ingested_after"),
    ):
        resp = alice.post("/v1/search", json=body)
        assert resp.status_code == 422 and resp.json()["error"]["field"].startswith(field), resp.text
    bad_order = alice.post("/v1/browse", json={"order": "random"})
    assert bad_order.status_code == 422 and bad_order.json()["error"]["field"] == "order"


def test_block_status_and_requeue(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    queued = alice.post("/v1/facts", json={"facts": ["A fact."], "extract": "async"}).json()["block_ids"][0]
    status = alice.get(f"/v1/memories/{queued}/status").json()
    assert status["status"] == "processing" and status["last_queued_at"] and status["fail_count"] == 0

    service.memory.llm = ScriptedLLM(lambda _: "not JSON at all")
    service.memory.max_attempts = 1
    failed = alice.post("/v1/facts", json={"facts": ["B fact."], "extract": "sync"}).json()
    assert failed["jobs_failed"] == 1
    block_id = failed["block_ids"][0]
    status = alice.get(f"/v1/memories/{block_id}/status").json()
    assert status["status"] == "extraction_failed" and status["fail_count"] >= 1

    bob = service.client(service.new_user("bob"))
    assert bob.post(f"/v1/memories/{block_id}/requeue").status_code == 404
    requeued = alice.post(f"/v1/memories/{block_id}/requeue")
    assert requeued.status_code == 200, requeued.text
    assert requeued.json()["status"] == "processing" and requeued.json()["block_id"] == block_id
    assert alice.get("/v1/memories/nope/status").status_code == 404


def test_prompt_registry(service: Service) -> None:
    admin = service.admin
    alice = service.client(service.new_user("alice"))
    body = {"prompt_id": "travel", "text": "List every place.", "description": "Trips", "annotations": {"team": "x"}}
    assert alice.post("/v1/prompts", json=body).status_code == 403  # writes: the admin only
    created = admin.post("/v1/prompts", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["current_version"] == 0 and created.json()["text"] == "List every place."
    dup = admin.post("/v1/prompts", json=body)
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "already_exists"

    v1 = admin.patch("/v1/prompts/travel", json={"text": "List every place and date."}).json()
    assert v1["current_version"] == 1 and v1["version_count"] == 2
    assert alice.get("/v1/prompts/travel").json()["text"] == "List every place and date."  # reads: any key
    assert alice.get("/v1/prompts/travel/versions/0").json()["text"] == "List every place."
    assert alice.get("/v1/prompts/travel/versions").json()["total"] == 2
    assert [p["prompt_id"] for p in alice.get("/v1/prompts").json()["items"]] == ["travel"]

    added = alice.post(
        "/v1/facts", json={"facts": ["I flew to Rome."], "prompt": {"prompt_id": "travel", "version": 0}}
    )
    assert added.status_code == 201, added.text
    block = alice.get(f"/v1/memories/{added.json()['block_ids'][0]}").json()
    assert block["prompt_id"] == "travel" and block["prompt_version"] == 0

    # The current version of a prompt with others cannot be purged; another can.
    assert admin.delete("/v1/prompts/travel", params={"version": 1}).status_code == 409
    assert admin.delete("/v1/prompts/travel", params={"version": 0}).status_code == 204
    assert alice.get("/v1/prompts/travel/versions/0").status_code == 404

    assert admin.post("/v1/prompts/travel/archive").status_code == 204
    archived = admin.patch("/v1/prompts/travel", json={"description": "x"})
    assert archived.status_code == 409 and archived.json()["error"]["code"] == "prompt_archived"
    used = alice.post("/v1/facts", json={"facts": ["x"], "prompt": {"prompt_id": "travel"}})
    assert used.status_code == 409
    assert admin.post("/v1/prompts", json=body).status_code == 409  # the id stays reserved
    assert alice.get("/v1/prompts").json()["total"] == 0
    assert alice.get("/v1/prompts", params={"include_archived": True}).json()["total"] == 1
    assert admin.delete("/v1/prompts/travel").status_code == 204
    assert admin.post("/v1/prompts", json=body).status_code == 201  # purged: the id is free again

    for bad, field in (
        ({**body, "prompt_id": "no spaces"}, "prompt_id"),
        ({**body, "prompt_id": "ok2", "description": "d" * 201}, "description"),
        ({**body, "prompt_id": "ok3", "text": ""}, "text"),
    ):
        resp = admin.post("/v1/prompts", json=bad)
        assert resp.status_code == 422 and resp.json()["error"]["field"] == field, resp.text
    assert alice.get("/v1/prompts/missing").status_code == 404


def test_an_expired_block_is_gone_from_every_read_at_once(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    short = alice.post("/v1/facts", json={"facts": ["Ephemeral walrus note."], "ttl_s": 1}).json()["block_ids"][0]
    kept = alice.post("/v1/facts", json={"facts": ["Lasting walrus note."]}).json()["block_ids"][0]
    assert alice.get(f"/v1/memories/{short}").status_code == 200
    time.sleep(1.3)  # the TTL counts from the write; no sweep runs in between
    assert alice.get(f"/v1/memories/{short}").status_code == 404
    for mode in ("vector", "keyword", "hybrid"):
        hits = alice.post("/v1/search", json={"query": "walrus note", "mode": mode}).json()
        assert [h["block_id"] for h in hits] == [kept], mode
    assert [b["block_id"] for b in alice.get("/v1/memories").json()] == [kept]
    assert alice.post("/v1/browse", json={}).json()["total"] == 1
    assert alice.get("/v1/sessions/default").json()["blocks"] == 1
    assert alice.patch(f"/v1/memories/{short}", json={"content": "Back?"}).status_code == 404


def test_prompt_filter_and_clearing_the_prompt_on_update(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    assert (
        service.admin.post("/v1/prompts", json={"prompt_id": "bio", "text": "Facts about people."}).status_code == 201
    )
    made = alice.post("/v1/facts", json={"facts": ["Ana is a nurse."], "prompt": {"prompt_id": "bio"}}).json()
    other = alice.post("/v1/facts", json={"facts": ["Ana likes tea."]}).json()
    hits = alice.post("/v1/search", json={"query": "Ana", "prompt_id": "bio"}).json()
    assert [h["block_id"] for h in hits] == made["block_ids"]
    assert alice.post("/v1/search", json={"query": "Ana", "prompt_id": "bio", "prompt_version": 1}).json() == []
    cleared = alice.patch(f"/v1/memories/{made['block_ids'][0]}", json={"prompt": None}).json()
    assert cleared["prompt_id"] is None and cleared["prompt_version"] is None
    kept = alice.patch(f"/v1/memories/{other['block_ids'][0]}", json={"annotations": {"a": "b"}}).json()
    assert kept["prompt_id"] is None and kept["annotations"] == {"a": "b"}
    unknown = alice.post("/v1/facts", json={"facts": ["x"], "prompt": {"prompt_id": "nope"}})
    assert unknown.status_code == 404
    bad = alice.post("/v1/search", json={"query": "Ana", "annotations": {"topic": 3}})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "annotations.topic"
    bad = alice.post("/v1/browse", json={"sessions": ["s1", "nul\u0000"]})
    assert bad.status_code == 422 and bad.json()["error"]["field"].startswith("sessions"), bad.text
