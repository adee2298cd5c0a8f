"""The Agent Memory routes answer every failure with that API's flat error body (a string code, a message,
details, the request id) and the documented status: malformed and mistyped bodies, ids that would reach
another route, unknown paths and methods, bodies over the limit, a Host not allowed. Never a 500 or a
traceback, and nothing half-written. memlane's own /v1 routes keep their nested body."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from agent_memory_support import AgentApi, flat_error, make_api
from http_support import ADMIN_KEY, MAX_BODY

from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http.agent_memory import serves

USER = "/users/alice"
SESSION = "/users/alice/sessions/s1"


def test_an_unknown_path_or_method_under_the_routes_is_flat(sqlite_api: AgentApi) -> None:
    admin = sqlite_api.admin
    flat_error(admin.get("/users/alice/nothing/here"), 404, "NOT_FOUND")
    flat_error(admin.get("/prompts/p/versions/extra"), 404, "NOT_FOUND")
    flat_error(admin.patch("/users/alice"), 405, "METHOD_NOT_ALLOWED")
    flat_error(admin.get("/health/nothing"), 404)
    # memlane's own routes keep their own body
    nested = admin.get("/v1/nothing")
    assert nested.status_code == 404 and nested.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/users/a%2Fb", 404),  # a slash: another path, no route of that shape
        ("/users/a%3Fb", 400),  # ? # % are refused by the id rule
        ("/users/a%23b", 400),
        ("/users/a%25b", 400),
        ("/users/%2E%2E", 400),
        ("/users/%2E", 400),
        ("/users/%20", 400),
        ("/users/alice/sessions/%2E%2E", 400),
        ("/users/alice/sessions/x%3Fy", 400),
        ("/prompts/a%25b", 400),
    ],
)
def test_ids_that_would_reach_another_route_are_refused(sqlite_api: AgentApi, path: str, status: int) -> None:
    for method in ("GET", "PUT", "DELETE"):
        resp = sqlite_api.admin.request(method, path, json={"name": "x"})
        if resp.status_code == 405:
            continue
        body = flat_error(resp, status)
        if status == 400:
            assert body["error"] == "INVALID_REQUEST" and body["details"]["field"].endswith("_id")


MALFORMED: list[tuple[str, str, Any]] = [
    ("POST", "/users", "{not json"),
    ("POST", "/users", []),
    ("POST", "/users", {"user_id": 7, "name": "x"}),
    ("POST", "/users", {"name": "x"}),
    ("POST", "/users/alice/sessions", {"session_id": ["s"]}),
    ("POST", "/users/alice/sessions", {"session_id": "s", "memory_blocks_ttl": -1}),
    ("POST", "/users/alice/sessions", {"session_id": "s", "memory_blocks_ttl": True}),
    ("POST", "/users/alice/sessions", {"session_id": "s", "annotations": {"k": 1}}),
    ("POST", SESSION + "/memory", {"messages": "hello"}),
    ("POST", SESSION + "/memory", {"facts": [1, 2]}),
    ("POST", SESSION + "/memory", {"facts": ["x"], "async_processing": "yes"}),
    ("POST", SESSION + "/memory", {"facts": ["x"], "memory_block_ttl": "60"}),
    ("POST", SESSION + "/memory/search", {"filters": {"relevant_k": 0}}),
    ("POST", SESSION + "/memory/search", {"filters": {"annotation_filter_mode": "sideways"}}),
    ("POST", SESSION + "/memory/search", {"filters": {"order_by": "size"}}),
    ("DELETE", SESSION + "/memory", {"block_ids": 5}),
    ("PUT", "/users/alice/ttl", {"new_ttl": -5}),
    ("PUT", "/users/alice/ttl", {"new_ttl": 1.5}),
    ("POST", "/prompts", {"prompt_id": "p", "prompt": "t"}),
]


@pytest.mark.parametrize(("method", "path", "body"), MALFORMED)
def test_malformed_and_mistyped_bodies_are_422_invalid_request(
    sqlite_api: AgentApi, method: str, path: str, body: Any
) -> None:
    content = body if isinstance(body, str) else None
    kwargs: dict[str, Any] = {"content": content} if content is not None else {"json": body}
    resp = sqlite_api.admin.request(method, path, **kwargs)
    err = flat_error(resp, 422, "INVALID_REQUEST")
    assert "field" in err["details"]
    assert sqlite_api.memory.users() == []  # nothing half-written


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/users?limit=0"), ("GET", "/users?offset=-1"), ("GET", "/users/alice/memory?limit=x")],
)
def test_bad_query_parameters_are_422(sqlite_api: AgentApi, method: str, path: str) -> None:
    flat_error(sqlite_api.admin.request(method, path), 422, "INVALID_REQUEST")


def test_a_body_over_the_limit_is_413_flat(sqlite_api: AgentApi) -> None:
    big = {"user_id": "alice", "name": "x" * (MAX_BODY + 10)}
    flat_error(sqlite_api.admin.post("/users", json=big), 413, "PAYLOAD_TOO_LARGE")
    assert sqlite_api.memory.users() == []


def test_a_host_not_allowed_is_421_flat_but_health_answers(sqlite_api: AgentApi) -> None:
    evil = sqlite_api.client(ADMIN_KEY, Host="evil.example")
    flat_error(evil.get("/users"), 421, "MISDIRECTED_REQUEST")
    health = sqlite_api.client(None, Host="evil.example").get("/health")
    assert health.status_code == 200 and health.json()["status"] == "healthy"


def test_the_routes_can_be_turned_off(tmp_path: Any) -> None:
    off = make_api(SqliteStore(tmp_path / "off.db"), agent_memory_api=False)
    try:
        resp = off.admin.get("/health")
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"  # memlane's own body
        assert off.client(None, Host="evil.example").get("/health").status_code == 421  # not exempt either
        assert not [p for p in off.app.openapi()["paths"] if serves(p)]
    finally:
        off.close()


def test_memlanes_own_error_bodies_also_carry_the_flat_one(sqlite_api: AgentApi) -> None:
    """A client of that API given a base URL ending in /v1 reaches memlane's own routes: it unwraps a
    ``detail`` object and reads a string code and a message there, while /v1 clients read ``error``."""
    admin = sqlite_api.admin
    answers = [
        (admin.get("/v1/users/alice/memory"), 404, "without /v1"),  # that API's path under /v1: no such route
        (admin.get("/v1/nothing"), 404, "no route GET /v1/nothing"),
        (admin.post("/v1/users/alice/sessions", json={}), 405, "POST is not allowed on /v1/users/alice/sessions"),
        (admin.get("/v1/users/nobody"), 404, "nobody"),  # a /v1 route's own answer
        (admin.post("/v1/users", json={"user_id": "x", "name": "X"}), 422, "user"),
        (sqlite_api.client("wrong-key").get("/v1/memories"), 401, "unknown"),
    ]
    for resp, status, words in answers:
        assert resp.status_code == status, resp.text
        body = resp.json()
        nested = body["error"]
        assert isinstance(nested["code"], str) and words in nested["message"], body
        assert body["detail"] == {
            "error": nested["code"].upper(),
            "message": nested["message"],
            "details": {"field": nested["field"]} if "field" in nested else {},
            "request_id": resp.headers["x-request-id"],
        }


def test_the_routes_turned_off_say_so(tmp_path: Any) -> None:
    off = make_api(SqliteStore(tmp_path / "off.db"), agent_memory_api=False)
    try:
        body = off.admin.get("/users/alice").json()
        assert "--no-agent-memory-api" in body["error"]["message"] and body["detail"]["error"] == "NOT_FOUND"
    finally:
        off.close()


# What a client sent, and the field its error must name (that API's name, not the core's).
FIELDS: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/users", {"user_id": "u" * 300, "name": "X"}, "user_id"),
    ("POST", "/users", {"user_id": "ok", "name": "N" * 300}, "name"),
    ("PUT", USER, {"name": "N" * 300}, "name"),
    ("PUT", USER + "/ttl", {"new_ttl": 10**12}, "new_ttl"),
    ("POST", USER + "/sessions", {"session_id": "s2", "memory_blocks_ttl": 10**12}, "memory_blocks_ttl"),
    ("POST", SESSION + "/memory", {"facts": ["x"], "memory_block_ttl": 10**12}, "memory_block_ttl"),
    ("POST", SESSION + "/memory", {"messages": [{"user_content": " ", "assistant_content": ""}]}, "messages[0]"),
    (
        "POST",
        SESSION + "/memory",
        {"messages": [{"user_content": "a", "assistant_content": "b\ud800"}]},
        "messages[0].assistant_content",
    ),
    ("POST", SESSION + "/memory", {"facts": ["x"], "prompt_id": "bad id"}, "prompt_id"),
    ("PUT", SESSION + "/memory/{fact}", {"memory_block_ttl": 10**12}, "memory_block_ttl"),
    ("PUT", SESSION + "/memory/{fact}", {"message": {"user_content": "a", "assistant_content": "b"}}, "message"),
    ("PUT", SESSION + "/memory/{exchange}", {"fact": "f"}, "fact"),
    ("PUT", SESSION + "/memory/{exchange}", {"message": {"user_content": "", "assistant_content": " "}}, "message"),
    (
        "PUT",
        SESSION + "/memory/{exchange}",
        {"message": {"user_content": "a\ud800", "assistant_content": "b"}},
        "message.user_content",
    ),
    ("PUT", SESSION + "/memory/{fact}", {"fact": "f\ud800"}, "fact"),
    ("PUT", SESSION + "/memory/{fact}", {"prompt_id": "bad id"}, "prompt_id"),
    ("POST", "/prompts", {"prompt_id": "p", "prompt": "t\ud800", "description": "d"}, "prompt"),
    ("PUT", "/prompts/p0", {"prompt": "t\ud800"}, "prompt"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), FIELDS)
def test_errors_name_the_fields_as_the_client_sent_them(
    sqlite_api: AgentApi, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    sqlite_api.session("alice", "s1")
    add = sqlite_api.admin.post(SESSION + "/memory", json={"facts": ["a fact"]}).json()
    turn = {"messages": [{"user_content": "hi", "assistant_content": "hello"}]}
    exchange = sqlite_api.admin.post(SESSION + "/memory", json=turn).json()
    sqlite_api.admin.post("/prompts", json={"prompt_id": "p0", "prompt": "t", "description": "d"})
    path = path.format(fact=add["block_ids"][0], exchange=exchange["block_ids"][0])
    sent = json.dumps(body)  # ASCII: a lone surrogate travels as its escape, \ud800
    err = flat_error(sqlite_api.admin.request(method, path, content=sent), 400, "INVALID_REQUEST")
    assert err["details"]["field"] == field and field in err["message"], err
    assert not re.search(r"\b(ttl_s|default_ttl_s|display_name|pairs|sides|prompt\.\w+)\b", err["message"]), err


def test_every_problem_of_a_body_is_said_in_full(sqlite_api: AgentApi) -> None:
    sqlite_api.session("alice", "s1")
    body = {"facts": ["ok", 7], "memory_block_ttl": "60", "async_processing": "yes"}
    err = flat_error(sqlite_api.admin.post(SESSION + "/memory", json=body), 422, "INVALID_REQUEST")
    assert err["details"]["field"] == "facts[1]"
    for field in ("facts[1]", "memory_block_ttl", "async_processing"):
        assert f"{field}: " in err["message"], err
