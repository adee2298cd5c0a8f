"""Retention over HTTP: the admin's policy routes and sweep, what a user's key may do, 4xx on bad input,
and expired blocks gone from every table of the store and from the LLM call log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from http_support import Service, chat
from test_http_delete_user import cells_containing

OLD, NEW = "2024-01-01T12:00:00Z", "2024-03-01T12:00:00Z"
AT = "2024-03-02T00:00:00Z"


def test_policies_and_a_sweep_leave_nothing_of_expired_blocks(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    service.new_user("bob")
    admin = service.admin
    old = chat("My quokkazanzibar plays the oboe.", "A quokkazanzibar with an oboe!")
    assert alice.post("/v1/memories", json={"messages": old, "time": OLD, "extract": "sync"}).status_code == 201
    new = chat("My wombatlisbon sings.", "Lovely wombatlisbon.")
    assert alice.post("/v1/memories", json={"messages": new, "time": NEW, "extract": "sync"}).status_code == 201

    assert admin.put("/v1/retention/default", json={"max_age_days": 30}).json() == {
        "max_age_days": 30,
        "max_blocks": None,
    }
    resp = admin.put("/v1/users/bob/retention", json={})
    assert resp.json() == {"user": "bob", "policy": {"max_age_days": None, "max_blocks": None}, "source": "user"}
    assert admin.get("/v1/retention").json() == {
        "default": {"max_age_days": 30, "max_blocks": None},
        "users": {"bob": {"max_age_days": None, "max_blocks": None}},
    }
    own = alice.get("/v1/users/alice/retention")  # a user may read what applies to them
    assert own.status_code == 200 and own.json()["source"] == "default"

    dry = admin.post("/v1/retention/apply", json={"dry_run": True, "at": AT}).json()
    assert dry["dry_run"] and dry["expired"] == 2
    assert len(alice.get("/v1/memories").json()) == 4
    done = admin.post("/v1/retention/apply", json={"user": "alice", "at": AT}).json()
    assert (done["expired"], done["users"][0]["remaining"], done["users"][0]["source"]) == (2, 2, "default")

    store_path: Path = service.memory.store.path  # type: ignore[attr-defined]
    assert cells_containing(store_path, "quokkazanzibar") == []  # blocks, facts, terms, jobs, cache: all gone
    assert cells_containing(service.call_log.path, "quokkazanzibar") == []
    assert cells_containing(store_path, "wombatlisbon")  # the kept exchange is all there
    assert cells_containing(service.call_log.path, "wombatlisbon")
    assert service.memory.store.integrity_check() == []

    assert admin.delete("/v1/users/bob/retention").status_code == 204
    assert admin.get("/v1/users/bob/retention").json()["source"] == "default"
    assert admin.delete("/v1/retention/default").status_code == 204
    assert admin.get("/v1/retention").json() == {"default": None, "users": {}}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("put", "/v1/retention/default", {"max_age_days": 0}, 422, "max_age_days"),
        ("put", "/v1/retention/default", {"max_age_days": -1}, 422, "max_age_days"),
        ("put", "/v1/retention/default", {"max_blocks": 10**30}, 422, "max_blocks"),
        ("put", "/v1/retention/default", {"max_blocks": "5"}, 422, "max_blocks"),
        ("put", "/v1/retention/default", {"max_age_days": True}, 422, "max_age_days"),
        ("put", "/v1/retention/default", {"days": 5}, 422, "days"),
        ("put", "/v1/users/alice/retention", {"max_age_days": 1.5}, 422, "max_age_days"),
        ("put", "/v1/users/nobody/retention", {"max_age_days": 5}, 404, None),
        ("get", "/v1/users/nobody/retention", None, 404, None),
        ("post", "/v1/retention/apply", {"user": "nobody"}, 404, None),
        ("post", "/v1/retention/apply", {"at": "not a time"}, 422, "at"),
        ("post", "/v1/retention/apply", {"dry_run": "yes"}, 422, "dry_run"),
    ],
)
def test_bad_input_is_4xx_with_a_clear_body(
    service: Service, method: str, path: str, body: dict[str, Any] | None, status: int, field: str | None
) -> None:
    service.new_user("alice")
    resp = service.admin.request(method, path, json=body)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["message"] and (field is None or error["field"] == field), error


def test_only_the_admin_sets_and_sweeps(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    service.new_user("bob")
    for method, path, body in (
        ("put", "/v1/retention/default", {"max_age_days": 1}),
        ("put", "/v1/users/alice/retention", {"max_age_days": 1}),
        ("delete", "/v1/users/alice/retention", None),
        ("post", "/v1/retention/apply", {}),
        ("get", "/v1/retention", None),
        ("get", "/v1/users/bob/retention", None),
    ):
        assert alice.request(method, path, json=body).status_code == 403, path
        assert service.client().request(method, path, json=body).status_code == 401, path
