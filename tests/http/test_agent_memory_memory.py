"""The memory routes on every store: adds of messages or facts (one block each, ids in input order),
updates in place, deletes by ids or all, search with every filter of that API, and listing within its
bounds. Extraction semantics (async, sync, off; no LLM: ready) and the limits (per-block tokens inside a
201, a full queue as 429 with Retry-After) run over SQLite with a scripted LLM."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from agent_memory_support import AgentApi, flat_error, make_api

from memlane.core.store.sqlite import SqliteStore

MEM = "/users/alice/sessions/s1/memory"
EXCHANGE = {"user_content": "My order hasn't arrived.", "assistant_content": "What's your order number?"}


def add(client: httpx.Client, body: dict[str, Any], path: str = MEM) -> list[str]:
    resp = client.post(path, json=body)
    assert resp.status_code == 201, resp.text
    return list(resp.json()["block_ids"])


def test_messages_and_facts_are_one_block_each_in_input_order(api: AgentApi) -> None:
    api.session("alice", "s1")
    resp = api.admin.post(
        MEM,
        json={
            "messages": [EXCHANGE, {"user_content": "", "assistant_content": "Only the reply"}],
            "annotations": {"agent": "support-bot"},
            "async_processing": True,
            "created_at": "2026-01-02T03:04:05",
            "unknown": "ignored",
        },
    )
    assert resp.status_code == 201
    body = resp.json()
    assert body["accepted_count"] == 2 and body["rejected_count"] == 0 and body["rejected_details"] == []
    facts = add(api.admin, {"facts": ["Customer is in the EU timezone.", "Prefers email."]})
    listed = api.admin.get("/users/alice/memory", params={"order_by": "ingested_at"}).json()
    by_id = {b["block_id"]: b for b in listed["memory_blocks"]}
    first, second = (by_id[i] for i in body["block_ids"])
    assert first["message"] == EXCHANGE and "fact" not in first
    assert second["message"] == {"user_content": "", "assistant_content": "Only the reply"}
    assert first["annotations"] == {"agent": "support-bot"} and first["status"] == "ready"  # no LLM: ready
    assert first["created_at"] == "2026-01-02T03:04:05+00:00"  # a naive time is UTC
    assert by_id[facts[0]]["fact"] == "Customer is in the EU timezone." and "message" not in by_id[facts[0]]
    assert all(b["user_id"] == "alice" and b["session_id"] == "s1" for b in by_id.values())


def test_bad_adds_store_nothing(api: AgentApi) -> None:
    api.session("alice", "s1")
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"facts": ["a"], "messages": [EXCHANGE]}, 400, "INVALID_REQUEST"),
        ({}, 400, "INVALID_REQUEST"),
        ({"messages": [{"user_content": " ", "assistant_content": ""}]}, 400, "INVALID_REQUEST"),
        ({"facts": ["ok", "  "]}, 400, "INVALID_REQUEST"),
        ({"facts": ["a"], "annotations": {"has-hyphen": "x"}}, 400, "INVALID_REQUEST"),
        ({"facts": ["a"], "created_at": "not a time"}, 400, "INVALID_REQUEST"),
        ({"facts": ["a"], "prompt_vid": 1}, 400, "INVALID_REQUEST"),
        ({"facts": ["a"], "prompt_id": "p", "context_required": False}, 400, "PROMPT_EXTRACTION_DISABLED"),
        ({"facts": ["a"], "prompt_id": "nope"}, 404, "PROMPT_NOT_FOUND"),
    ]
    for body, status, code in cases:
        err = flat_error(api.admin.post(MEM, json=body), status, code)
        assert err["message"], body
    flat_error(api.admin.post("/users/alice/sessions/nope/memory", json={"facts": ["a"]}), 404, "SESSION_NOT_FOUND")
    flat_error(api.admin.post("/users/nobody/sessions/s1/memory", json={"facts": ["a"]}), 404)
    assert api.memory.count("alice") == 0
    assert [u.name for u in api.memory.users()] == ["alice"]  # the unknown user was not created


def test_items_over_the_token_limit_are_rejected_inside_the_201(tmp_path: Any) -> None:
    small = make_api(SqliteStore(tmp_path / "t.db"), agent_block_tokens=10)
    try:
        small.session("alice", "s1")
        resp = small.admin.post(MEM, json={"facts": ["short", "x" * 200, "also short"]})
        assert resp.status_code == 201
        body = resp.json()
        assert body["accepted_count"] == 2 and len(body["block_ids"]) == 2 and body["rejected_count"] == 1
        detail = body["rejected_details"][0]
        assert detail["input_index"] == 1 and detail["actual_tokens"] == 50 and detail["per_request_token_limit"] == 10
        stored = sorted(b.message for b in small.memory.browse("alice").items)
        assert stored == ["also short", "short"]
        every = small.admin.post(MEM, json={"facts": ["y" * 100]}).json()
        assert every["accepted_count"] == 0 and every["block_ids"] == [] and every["rejected_count"] == 1
    finally:
        small.close()


def test_search_is_session_scoped_by_default_and_widens(api: AgentApi) -> None:
    api.session("alice", "s1")
    api.session("alice", "s2")
    a = add(api.admin, {"facts": ["The shipping was delayed by a week."]})
    b = add(api.admin, {"facts": ["A shipping delay again, this time two days."]}, "/users/alice/sessions/s2/memory")
    here = api.admin.post(MEM + "/search", json={"query": "shipping delay"}).json()
    assert [x["block_id"] for x in here["memory_blocks"]] == a and here["count"] == 1
    assert isinstance(here["memory_blocks"][0]["rel_score"], float)
    for scope in ("all", ["all"], ["s1", "s2"]):
        wide = api.admin.post(MEM + "/search", json={"query": "shipping delay", "filters": {"session_ids": scope}})
        assert sorted(x["block_id"] for x in wide.json()["memory_blocks"]) == sorted(a + b), scope
    only = api.admin.post(MEM + "/search", json={"query": "shipping", "filters": {"session_ids": ["s2"]}}).json()
    assert [x["block_id"] for x in only["memory_blocks"]] == b
    capped = {"query": "shipping", "filters": {"session_ids": "all", "relevant_k": 1}}
    assert api.admin.post(MEM + "/search", json=capped).json()["count"] == 1
    flat_error(api.admin.post("/users/alice/sessions/zz/memory/search", json={"query": "x"}), 404, "SESSION_NOT_FOUND")
    flat_error(api.admin.post(MEM + "/search", json={"query": "   "}), 400, "INVALID_REQUEST")


def test_search_filters_annotations_times_ids_and_order(api: AgentApi) -> None:
    api.session("alice", "s1")
    old = add(api.admin, {"facts": ["apples are red"], "annotations": {"kind": "color"}, "created_at": "2020-01-01"})
    mid = add(api.admin, {"facts": ["apples are sweet"], "annotations": {"kind": "taste"}, "created_at": "2022-01-01"})
    time.sleep(0.01)
    cut = datetime.now(UTC).isoformat()
    time.sleep(0.01)
    new = add(api.admin, {"facts": ["apples are crisp"], "annotations": {"kind": "taste", "src": "x"}})

    def ids(filters: dict[str, Any], query: str | None = "apples") -> list[str]:
        body: dict[str, Any] = {"filters": filters}
        if query is not None:
            body["query"] = query
        resp = api.admin.post(MEM + "/search", json=body)
        assert resp.status_code == 200, resp.text
        return [b["block_id"] for b in resp.json()["memory_blocks"]]

    assert sorted(ids({"annotations": {"kind": "taste"}})) == sorted(mid + new)
    assert ids({"annotations": {"kind": "taste", "src": "x"}}) == new
    assert ids({"annotations": {"kind": "Taste"}}) == []  # exact, case-sensitive
    # pre (the default) finds the match beyond the top k; post filters the top k after the cut
    assert ids({"annotations": {"kind": "color"}, "relevant_k": 1}) == old
    post = ids({"annotations": {"kind": "color"}, "relevant_k": 1, "annotation_filter_mode": "post"}, "crisp")
    assert post == []
    assert ids({"start_time": cut}) == new  # ingest time, [start, end)
    assert sorted(ids({"end_time": cut})) == sorted(old + mid)
    assert ids({"created_start_time": "2021-01-01", "created_end_time": "2023-01-01"}) == mid
    assert ids({"block_ids": old + new}, None) == new + old  # query-less: newest first by ingest time
    assert ids({"order_by": "created_at"}, None) == new + mid + old
    assert ids({"order_by": "ingested_at"}, None) == new + mid + old
    flat_error(api.admin.post(MEM + "/search", json={"filters": {"start_time": "yesterday-ish"}}), 400)
    flat_error(api.admin.post(MEM + "/search", json={"filters": {"prompt_vid": 0}}), 400, "INVALID_REQUEST")
    bodiless = api.admin.post(MEM + "/search")  # no body: every block of the session
    assert bodiless.status_code == 200 and bodiless.json()["count"] == 3


def test_listing_pages_sessions_and_order(api: AgentApi) -> None:
    api.session("alice", "s1")
    api.session("alice", "s2")
    first = add(api.admin, {"facts": ["one"], "created_at": "2024-05-01"})
    second = add(api.admin, {"facts": ["two"], "created_at": "2023-05-01"}, "/users/alice/sessions/s2/memory")
    third = add(api.admin, {"facts": ["three"], "created_at": "2025-05-01"})

    def listing(**params: Any) -> dict[str, Any]:
        resp = api.admin.get("/users/alice/memory", params=params)
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    everything = listing(limit=20, offset=0, order_by="ingested_at")
    assert [b["block_id"] for b in everything["memory_blocks"]] == third + second + first
    assert (everything["count"], everything["total"], everything["limit"], everything["offset"]) == (3, 3, 20, 0)
    assert [b["block_id"] for b in listing(order_by="created_at")["memory_blocks"]] == third + first + second
    assert [b["block_id"] for b in listing(session_ids="s2")["memory_blocks"]] == second
    assert [b["block_id"] for b in listing(session_ids="s1,s2", limit=1, offset=1)["memory_blocks"]] == second
    assert listing(session_ids="all")["total"] == 3
    assert listing(limit=1000)["limit"] == 200  # clamped to the client's bound, never echoed above it
    flat_error(api.admin.get("/users/nobody/memory"), 404, "USER_NOT_FOUND")
    flat_error(api.admin.get("/users/alice/memory", params={"order_by": "size"}), 422, "INVALID_REQUEST")


def test_update_replaces_content_annotations_and_ttl_keeping_the_id(api: AgentApi) -> None:
    api.session("alice", "s1")
    api.session("alice", "s2")
    fact = add(api.admin, {"facts": ["likes tea"], "annotations": {"a": "1"}})[0]
    turn = add(api.admin, {"messages": [EXCHANGE]})[0]
    resp = api.admin.put(f"{MEM}/{fact}", json={"fact": "likes coffee", "async_processing": True})
    assert resp.status_code == 200
    block = resp.json()["block"]
    assert block["block_id"] == fact and block["fact"] == "likes coffee" and block["annotations"] == {"a": "1"}
    hits = api.admin.post(MEM + "/search", json={"query": "coffee", "filters": {"relevant_k": 1}}).json()
    assert hits["memory_blocks"][0]["block_id"] == fact
    new_turn = {"user_content": "Order 17.", "assistant_content": "Found it."}
    moved = api.admin.put(f"{MEM}/{turn}", json={"message": new_turn, "annotations": {"b": "2"}}).json()["block"]
    assert moved["message"] == new_turn and moved["annotations"] == {"b": "2"}
    ttl = api.admin.put(f"{MEM}/{turn}", json={"memory_block_ttl": 3600}).json()["block"]
    assert ttl["message"] == new_turn  # a TTL alone changes nothing else
    flat_error(api.admin.put(f"{MEM}/{fact}", json={"message": new_turn}), 400, "INVALID_REQUEST")  # kind is fixed
    flat_error(api.admin.put(f"{MEM}/{fact}", json={}), 400, "INVALID_REQUEST")
    flat_error(api.admin.put(f"{MEM}/{fact}", json={"fact": " "}), 400, "INVALID_REQUEST")
    flat_error(api.admin.put(f"{MEM}/nope", json={"fact": "x"}), 404, "BLOCK_NOT_FOUND")
    wrong_session = api.admin.put(f"/users/alice/sessions/s2/memory/{fact}", json={"fact": "x"})
    flat_error(wrong_session, 404, "BLOCK_NOT_FOUND")
    api.admin.post("/users/alice/sessions/s1/end")
    flat_error(api.admin.put(f"{MEM}/{fact}", json={"fact": "too late"}), 400, "SESSION_ALREADY_ENDED")
    assert api.memory.get("alice", fact).message == "likes coffee"


def test_delete_by_ids_or_all_counts_absent_blocks_as_deleted(api: AgentApi) -> None:
    api.session("alice", "s1")
    api.session("alice", "s2")
    ids = add(api.admin, {"facts": ["a", "b", "c"]})
    other = add(api.admin, {"facts": ["elsewhere"]}, "/users/alice/sessions/s2/memory")
    resp = api.admin.request("DELETE", MEM, json={"block_ids": [ids[0], "gone-already"]})
    assert resp.status_code == 200 and resp.json() == {"deleted_count": 2, "failed_count": 0, "failed_block_ids": []}
    mixed = api.admin.request("DELETE", MEM, json={"block_ids": [ids[1], other[0]]}).json()
    assert mixed == {"deleted_count": 1, "failed_count": 1, "failed_block_ids": other}  # s2's block is not s1's
    flat_error(api.admin.request("DELETE", MEM, json={"block_ids": other}), 404, "BLOCK_NOT_FOUND")
    flat_error(api.admin.request("DELETE", MEM, json={"block_ids": []}), 400, "INVALID_REQUEST")
    bad_id = api.admin.request("DELETE", MEM, json={"block_ids": [ids[2], "a/b"]})
    flat_error(bad_id, 400, "INVALID_REQUEST")
    assert api.memory.get("alice", ids[2]).id == ids[2]  # nothing half-deleted
    single = api.admin.request("DELETE", MEM, json={"block_ids": ids[2]}).json()  # one id as a string
    assert single["deleted_count"] == 1
    add(api.admin, {"facts": ["d", "e"]})
    everything = api.admin.request("DELETE", MEM, json={"block_ids": "all"}).json()
    assert everything["deleted_count"] == 2
    assert [b.id for b in api.memory.browse("alice").items] == other


def test_search_and_list_answer_without_an_llm_and_blocks_are_ready(api: AgentApi) -> None:
    api.session("alice", "s1")
    add(api.admin, {"facts": ["a"], "async_processing": True})
    add(api.admin, {"facts": ["b"], "async_processing": False})  # extraction is off on a server with no LLM
    blocks = api.admin.get("/users/alice/memory").json()["memory_blocks"]
    assert {b["status"] for b in blocks} == {"ready"} and all("summary" not in b for b in blocks)


def test_async_sync_and_no_extraction(llm_api: AgentApi) -> None:
    llm_api.session("alice", "s1")
    queued = add(llm_api.admin, {"messages": [EXCHANGE], "async_processing": True})[0]
    synced = add(llm_api.admin, {"messages": [EXCHANGE], "async_processing": False})[0]
    skipped = add(llm_api.admin, {"facts": ["no extraction"], "context_required": False})[0]
    by_id = {b["block_id"]: b for b in llm_api.admin.get("/users/alice/memory").json()["memory_blocks"]}
    assert by_id[queued]["status"] == "processing" and "summary" not in by_id[queued]
    assert by_id[synced]["status"] == "ready" and by_id[synced]["summary"].startswith("Summary:")
    assert by_id[synced]["contexts"] and by_id[skipped]["status"] == "ready" and by_id[skipped]["contexts"] == []
    # searchable at once, while processing
    found = llm_api.admin.post(MEM + "/search", json={"query": "order arrived", "filters": {"block_ids": [queued]}})
    assert found.json()["memory_blocks"][0]["status"] == "processing"
    llm_api.memory.worker(concurrency=1).run(drain=True)  # what memlane serve's workers do
    done = llm_api.admin.post(MEM + "/search", json={"filters": {"block_ids": [queued]}}).json()["memory_blocks"][0]
    assert done["status"] == "ready" and done["summary"].startswith("Summary:")


def test_a_full_queue_is_429_with_retry_after(tmp_path: Any) -> None:
    full = make_api(SqliteStore(tmp_path / "q.db"), llm=True, agent_queue_max=2)
    try:
        full.session("alice", "s1")
        add(full.admin, {"facts": ["one", "two"]})
        resp = full.admin.post(MEM, json={"facts": ["three"]})
        err = flat_error(resp, 429, "QUEUE_FULL")
        assert resp.headers["retry-after"] == "5" and err["details"]["retry_after_seconds"] == 5
        assert full.memory.count("alice") == 2  # the refused add wrote nothing
        add(full.admin, {"facts": ["not queued"], "context_required": False})  # no extraction: not refused
    finally:
        full.close()


def test_time_windows_read_naive_times_as_utc(api: AgentApi) -> None:
    api.session("alice", "s1")
    add(api.admin, {"facts": ["dated"], "created_at": "2024-03-01T12:00:00"})
    window = {"created_start_time": "2024-03-01T11:59:00", "created_end_time": "2024-03-01T12:01:00"}
    assert api.admin.post(MEM + "/search", json={"filters": window}).json()["count"] == 1
    later = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert api.admin.post(MEM + "/search", json={"filters": {"start_time": later}}).json()["count"] == 0
