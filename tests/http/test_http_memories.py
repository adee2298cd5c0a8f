"""Memories over HTTP: the round trip, search shaped like `memlane search --json`, validation errors that name
the field, size limits (413), extraction modes and the queue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from http_support import MAX_BODY, Service, chat

from memlane.interfaces.wire.shapes import hit_json

ANA = chat("My sister Ana moved to Lisbon.", "Lisbon is a lovely city!")


def test_add_search_get_list_delete(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    resp = alice.post("/v1/memories", json={"messages": ANA, "session_id": "s1", "time": "1:56 pm on 8 May, 2023"})
    assert resp.status_code == 201, resp.text
    added = resp.json()
    assert added["user"] == "alice" and added["exchanges"] == 1 and len(added["block_ids"]) == 2

    hits = alice.post("/v1/search", json={"query": "Where does Ana live?", "k": 3}).json()
    # One exchange, one hit: the assistant's perspective is folded into the user's.
    assert len(hits) == 1 and "Lisbon" in hits[0]["message"] and hits[0]["score_kind"] == "fusion"
    assert {hits[0]["block_id"], *hits[0]["other_perspectives"]} == set(added["block_ids"])
    assert hits[0]["time"].startswith("2023-05-08T13:56") and hits[0]["time_annotation"] == "1:56 pm on 8 May, 2023"

    block_id = added["block_ids"][0]
    got = alice.get(f"/v1/memories/{block_id}").json()
    assert got["block_id"] == block_id and got["session_id"] == "s1"
    listed = alice.get("/v1/memories", params={"session_id": "s1", "limit": 1}).json()
    assert len(listed) == 1
    assert alice.delete(f"/v1/memories/{block_id}").status_code == 204
    assert alice.get(f"/v1/memories/{block_id}").status_code == 404
    assert len(alice.get("/v1/memories").json()) == 1


def test_search_hits_are_what_the_cli_prints(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    alice.post("/v1/memories", json={"messages": ANA, "time": "2023-05-08T13:56:00Z"})
    over_http = alice.post("/v1/search", json={"query": "Ana Lisbon", "mode": "keyword"}).json()
    direct = [hit_json(h) for h in service.memory.search("alice", "Ana Lisbon", mode="keyword")]
    assert over_http == json.loads(json.dumps(direct))


def test_time_window_and_modes(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    alice.post(
        "/v1/memories", json={"messages": chat("I bought a red bike."), "time": "2023-01-01", "perspective": "single"}
    )
    alice.post(
        "/v1/memories", json={"messages": chat("I sold the red bike."), "time": 1_700_000_000, "perspective": "single"}
    )
    for mode in ("vector", "keyword", "hybrid"):
        body = {"query": "red bike", "mode": mode, "before": "2023-06-01"}
        hits = alice.post("/v1/search", json=body).json()
        assert [h["message"] for h in hits] == ["user: I bought a red bike."], mode
    hits = alice.post("/v1/search", json={"query": "red bike", "after": 1_690_000_000.5}).json()
    assert [h["message"] for h in hits] == ["user: I sold the red bike."]
    # A time phrase is read against ``at``: it prefers the block it points at, it does not filter.
    for query, at, first in [
        ("what did I do with the red bike ten months ago", "2023-11-15", "bought"),
        ("what did I do with the red bike a week ago", "2023-11-20", "sold"),
    ]:
        hits = alice.post("/v1/search", json={"query": query, "at": at}).json()
        assert len(hits) == 2 and first in hits[0]["message"], (query, hits)


def invalid_requests() -> Iterator[tuple[str, dict[str, Any], str]]:
    ok = {"messages": ANA}
    yield "/v1/memories", {}, "messages"
    yield "/v1/memories", {"messages": []}, "messages"
    yield "/v1/memories", {"messages": [{"role": "user", "content": ""}]}, "messages[0].content"
    yield "/v1/memories", {"messages": [{"role": "user"}]}, "messages[0].content"
    yield "/v1/memories", {"messages": [{"role": "martian", "content": "hi"}]}, "messages[0].role"
    yield "/v1/memories", {"messages": [{"content": "hi"}]}, "messages[0]"
    yield "/v1/memories", {"messages": [{"role": "user", "speaker": "Ana", "content": "hi"}]}, "messages[0]"
    yield "/v1/memories", {"messages": [{"role": "user", "content": "x", "time": "yesterday"}]}, "messages[0].time"
    yield "/v1/memories", {**ok, "time": "not a time"}, "time"
    yield "/v1/memories", {**ok, "time": 1e300}, "time"
    yield "/v1/memories", {**ok, "perspective": "sideways"}, "perspective"
    yield "/v1/memories", {**ok, "extract": "later"}, "extract"
    yield "/v1/memories", {**ok, "session_id": "a\x00b"}, "session_id"
    yield "/v1/memories", {**ok, "user": "bob"}, "user"  # the user comes from the key, never the body
    yield "/v1/memories", {"messages": [{"role": "user", "content": "x" * 70_000}]}, "messages[0].content"
    yield "/v1/search", {"query": ""}, "query"
    yield "/v1/search", {"query": "x", "k": 0}, "k"
    yield "/v1/search", {"query": "x", "k": 5000}, "k"
    yield "/v1/search", {"query": "x", "mode": "psychic"}, "mode"
    yield "/v1/search", {"query": "x", "before": "someday"}, "before"
    yield "/v1/search", {"query": "x", "at": "someday"}, "at"
    yield "/v1/search", {"query": "x", "kk": 3}, "kk"


@pytest.mark.parametrize(("path", "body", "field"), list(invalid_requests()))
def test_validation_errors_are_422_and_name_the_field(
    service: Service, path: str, body: dict[str, Any], field: str
) -> None:
    resp = service.client(service.new_user("alice")).post(path, json=body)
    if len(json.dumps(body)) > MAX_BODY:
        assert resp.status_code == 413
        return
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert err["code"] == "validation_error" and err["field"] == field and field in err["message"]


def test_speaker_messages_are_taken_as_the_cli_takes_them(service: Service) -> None:
    """``{"speaker": ..., "content": ...}`` (a chat between two people) works over HTTP as in the CLI and the
    Python API: the speaker is the message's role."""
    alice = service.client(service.new_user("alice"))
    talk = [{"speaker": "Ana", "content": "I moved to Lisbon."}, {"speaker": "Bo", "content": "Lovely city!"}]
    resp = alice.post("/v1/memories", json={"messages": talk, "perspective": "speakers"})
    assert resp.status_code == 201, resp.text
    blocks = alice.get("/v1/memories").json()
    assert sorted(b["perspective"] for b in blocks) == ["Ana", "Bo"]
    assert blocks[0]["message"] == "Ana: I moved to Lisbon.\nBo: Lovely city!"
    resp = alice.post("/v1/memories", json={"messages": [{"content": "hi"}]})
    assert resp.status_code == 422 and "neither role nor speaker" in resp.json()["error"]["message"]


def test_query_parameters_are_validated_too(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    for params, field in (({"limit": 0}, "limit"), ({"offset": -1}, "offset"), ({"limit": "many"}, "limit")):
        resp = alice.get("/v1/memories", params=params)
        assert resp.status_code == 422 and resp.json()["error"]["field"] == field


def test_malformed_json_is_400(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    resp = alice.post("/v1/memories", content=b'{"messages": [', headers={"content-type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"]["field"] == "body"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"messages": [', "JSON decode error"),
        (b'{"messages": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", "nested too deeply"),
        (b'{"a":' * 5_000 + b"1" + b"}" * 5_000, "nested too deeply"),
        (b'{"messages": [], "time": ' + b"9" * 5_000 + b"}", "a number with too many digits"),
    ],
)
def test_every_unreadable_body_gets_the_same_400(service: Service, body: bytes, reason: str) -> None:
    """Bad syntax, nesting deeper than the parser goes and integers too long to convert are all one kind of
    error: 400, field body, 'body is not valid JSON: <why>', with the request id."""
    assert len(body) <= MAX_BODY
    resp = service.client(service.new_user("alice")).post(
        "/v1/memories", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert (err["code"], err["field"]) == ("bad_request", "body")
    assert err["message"] == f"body is not valid JSON: {reason} (send a JSON body, Content-Type: application/json)"
    assert err["request_id"] == resp.headers["x-request-id"]


def test_bodies_over_the_limit_are_413_declared_or_streamed(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    big = json.dumps({"messages": chat("x" * 40_000, "y" * 40_000)}).encode()
    assert len(big) > MAX_BODY
    resp = alice.post("/v1/memories", content=big, headers={"content-type": "application/json"})
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "payload_too_large"
    assert resp.json()["error"]["request_id"] == resp.headers["x-request-id"]  # as in every error body

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts while reading
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    resp = alice.post("/v1/memories", content=chunks(), headers={"content-type": "application/json"})
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "payload_too_large"
    assert resp.json()["error"]["request_id"] == resp.headers["x-request-id"]
    assert alice.get("/v1/memories").json() == []


def test_async_extraction_queues_jobs_and_sync_runs_them(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    added = alice.post("/v1/memories", json={"messages": ANA, "extract": "async"}).json()
    assert added["jobs_enqueued"] == 2
    queue = alice.get("/v1/queue").json()
    assert (queue["queued"], queue["done"]) == (2, 0)
    assert alice.get(f"/v1/memories/{added['block_ids'][0]}").json()["extraction_status"] == "queued"

    added = alice.post("/v1/memories", json={"messages": chat("I play the cello."), "extract": "sync"}).json()
    block = alice.get(f"/v1/memories/{added['block_ids'][0]}").json()
    assert block["extraction_status"] == "done" and block["facts"] == ["Fact: user: I play the cello."]
    assert alice.get("/v1/queue").json()["done"] == 2


def test_sync_extraction_without_an_llm_is_a_4xx(service: Service) -> None:
    """The message names the server's settings, not the Python arguments a caller over HTTP cannot pass."""
    service.memory.llm = None
    alice = service.client(service.new_user("alice"))
    resp = alice.post("/v1/memories", json={"messages": ANA, "extract": "sync"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "config_error"
    message = resp.json()["error"]["message"]
    assert "MEMLANE_LLM_BASE_URL" in message and "MEMLANE_LLM_MODEL" in message and "'async'" in message
    assert "Memory(" not in message and "--llm" not in message
    assert alice.get("/v1/memories").json() == []  # nothing stored


def test_users_are_listed_for_the_admin(service: Service) -> None:
    service.new_user("alice")
    service.client(service.new_user("bob")).post("/v1/memories", json={"messages": ANA})
    users = {u["user"]: u["blocks"] for u in service.admin.get("/v1/users").json()}
    assert users == {"alice": 0, "bob": 2}
    again = service.admin.post("/v1/users", json={"user": "alice"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_exists"
    again = service.admin.post("/v1/users", json={"user": "alice", "exist_ok": True})
    assert again.status_code == 200 and again.json() == {"user": "alice", "created": False}
    bad = service.admin.post("/v1/users", json={"user": "a/b"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "user"


def test_a_search_before_the_first_add_does_not_break_the_add(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    assert alice.post("/v1/search", json={"query": "anything"}).json() == []
    assert alice.post("/v1/memories", json={"messages": ANA}).status_code == 201


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain; charset=utf-8"])
def test_a_json_body_is_read_whatever_content_type_it_declares(service: Service, content_type: str) -> None:
    # What `curl -d '{...}'` sends: a JSON body labelled as a form.
    alice = service.client(service.new_user("alice"))
    body = json.dumps({"messages": chat("I moved to Ghent.", "Nice!")})
    resp = alice.post("/v1/memories", content=body, headers={"Content-Type": content_type})
    assert resp.status_code == 201, resp.text
    resp = alice.post("/v1/search", content='{"query": "Ghent"}', headers={"Content-Type": content_type})
    assert resp.status_code == 200 and len(resp.json()) == 1
    resp = alice.post("/v1/search", content="query=Ghent", headers={"Content-Type": content_type})
    assert resp.status_code == 400
    assert "Content-Type: application/json" in resp.json()["error"]["message"]
