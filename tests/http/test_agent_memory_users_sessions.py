"""Users and sessions through the Agent Memory routes, on every store: the documented statuses (201, 204,
409, 404, 400 SESSION_ALREADY_ENDED), the answer fields that API's clients require, pagination echoes
within their bounds, and the user-scoped TTL change."""

from __future__ import annotations

from agent_memory_support import AgentApi, flat_error


def test_a_user_is_created_once_read_updated_listed_and_deleted(api: AgentApi) -> None:
    admin = api.admin
    made = admin.post(
        "/users", json={"user_id": "customer-42", "name": "Example Customer", "metadata": {"tier": "gold"}}
    )
    assert made.status_code == 201
    assert made.json() == {
        "id": "customer-42",
        "name": "Example Customer",
        "metadata": {"tier": "gold"},
        "sessions": [],
    }
    flat_error(admin.post("/users", json={"user_id": "customer-42", "name": "Again"}), 409, "ALREADY_EXISTS")
    assert admin.get("/users/customer-42").json()["name"] == "Example Customer"  # the 409 changed nothing
    flat_error(admin.get("/users/nobody"), 404, "USER_NOT_FOUND")

    api.session("customer-42", "conv-1")
    got = admin.get("/users/customer-42").json()
    assert got["sessions"] == ["conv-1"] and got["metadata"] == {"tier": "gold"}
    renamed = admin.put("/users/customer-42", json={"name": "Renamed", "unknown_field": 1})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Renamed"
    assert renamed.json()["metadata"] == {"tier": "gold"}  # omitted: kept
    assert admin.put("/users/customer-42", json={"metadata": {"tier": "silver"}}).json()["name"] == "Renamed"
    flat_error(admin.put("/users/customer-42", json={}), 400, "INVALID_REQUEST")
    flat_error(admin.put("/users/customer-42", json={"name": "  "}), 400, "INVALID_REQUEST")
    flat_error(admin.put("/users/nobody", json={"name": "x"}), 404, "USER_NOT_FOUND")

    deleted = admin.delete("/users/customer-42")
    assert deleted.status_code == 204 and deleted.content == b""
    flat_error(admin.get("/users/customer-42"), 404, "USER_NOT_FOUND")
    flat_error(admin.get("/users/customer-42/sessions/conv-1"), 404)
    flat_error(admin.delete("/users/customer-42"), 404, "USER_NOT_FOUND")


def test_users_are_listed_by_name_and_metadata_a_page_at_a_time(api: AgentApi) -> None:
    admin = api.admin
    for i in range(5):
        body = {"user_id": f"u{i}", "name": "Team A" if i < 3 else "Team B", "metadata": {"region": f"r{i % 2}"}}
        assert admin.post("/users", json=body).status_code == 201
    page = admin.get("/users", params={"limit": 2, "offset": 0}).json()
    assert page["count"] == 2 and page["total"] == 5 and page["limit"] == 2 and page["offset"] == 0
    rest = admin.get("/users", params={"limit": 2, "offset": 4}).json()
    assert rest["count"] == 1 and rest["total"] == 5
    named = admin.get("/users", params={"name": "Team A", "limit": 50}).json()
    assert sorted(u["id"] for u in named["users"]) == ["u0", "u1", "u2"]
    both = admin.get("/users", params=[("name", "Team A"), ("metadata", "region=r0"), ("limit", "50")]).json()
    assert sorted(u["id"] for u in both["users"]) == ["u0", "u2"] and both["total"] == 2
    clamped = admin.get("/users", params={"limit": 100_000}).json()
    assert clamped["limit"] == 500 and clamped["count"] == 5  # never echoes a limit over the client's bound
    flat_error(admin.get("/users", params={"metadata": "no-equals-sign"}), 400, "INVALID_REQUEST")


def test_a_session_is_created_once_read_updated_ended_and_deleted(api: AgentApi) -> None:
    admin = api.admin
    admin.post("/users", json={"user_id": "alice", "name": "Alice"})
    body = {"session_id": "conv-100", "annotations": {"channel": "web"}, "metadata": {"n": 1}, "memory_blocks_ttl": 0}
    made = admin.post("/users/alice/sessions", json=body)
    assert made.status_code == 201
    s = made.json()
    assert (s["user_id"], s["session_id"], s["end_time"], s["blocks_ttl"]) == ("alice", "conv-100", None, 0)
    assert s["annotations"] == {"channel": "web"} and s["metadata"] == {"n": 1} and s["start_time"].endswith("+00:00")
    flat_error(admin.post("/users/alice/sessions", json={"session_id": "conv-100"}), 409, "ALREADY_EXISTS")
    flat_error(admin.post("/users/nobody/sessions", json={"session_id": "s"}), 404, "USER_NOT_FOUND")
    flat_error(admin.get("/users/alice/sessions/nope"), 404, "SESSION_NOT_FOUND")
    assert admin.get("/users/alice/sessions/conv-100").json() == s

    updated = admin.put("/users/alice/sessions/conv-100", json={"annotations": {"channel": "app"}}).json()
    assert updated["annotations"] == {"channel": "app"} and updated["metadata"] == {"n": 1}
    flat_error(admin.put("/users/alice/sessions/conv-100", json={}), 400, "INVALID_REQUEST")
    flat_error(admin.put("/users/alice/sessions/conv-100", json={"annotations": {"bad-key": "x"}}), 400)

    ended = admin.post("/users/alice/sessions/conv-100/end")  # no body, as the client sends it
    assert ended.status_code == 200 and ended.json()["end_time"] is not None
    flat_error(admin.post("/users/alice/sessions/conv-100/end"), 400, "SESSION_ALREADY_ENDED")
    flat_error(admin.put("/users/alice/sessions/conv-100", json={"metadata": {"n": 2}}), 400, "SESSION_ALREADY_ENDED")
    adding = admin.post("/users/alice/sessions/conv-100/memory", json={"facts": ["too late"]})
    flat_error(adding, 400, "SESSION_ALREADY_ENDED")
    assert api.memory.count("alice") == 0  # nothing half-written

    assert admin.delete("/users/alice/sessions/conv-100").status_code == 204
    flat_error(admin.get("/users/alice/sessions/conv-100"), 404, "SESSION_NOT_FOUND")
    flat_error(admin.delete("/users/alice/sessions/conv-100"), 404, "SESSION_NOT_FOUND")


def test_deleting_a_session_deletes_its_blocks_only(api: AgentApi) -> None:
    api.session("alice", "s1")
    api.session("alice", "s2")
    for sid in ("s1", "s2"):
        resp = api.admin.post(f"/users/alice/sessions/{sid}/memory", json={"facts": [f"fact of {sid}"]})
        assert resp.status_code == 201
    assert api.admin.delete("/users/alice/sessions/s1").status_code == 204
    left = api.admin.get("/users/alice/memory", params={"session_ids": "all"}).json()
    assert [b["session_id"] for b in left["memory_blocks"]] == ["s2"]


def test_sessions_are_listed_newest_first_within_bounds(api: AgentApi) -> None:
    for i in range(3):
        api.session("alice", f"s{i}")
    page = api.admin.get("/users/alice/sessions").json()
    assert [s["session_id"] for s in page["sessions"]] == ["s2", "s1", "s0"]
    assert page["count"] == 3 and page["total"] == 3 and page["limit"] == 50 and page["offset"] == 0
    small = api.admin.get("/users/alice/sessions", params={"limit": 1, "offset": 1}).json()
    assert [s["session_id"] for s in small["sessions"]] == ["s1"] and small["total"] == 3
    assert api.admin.get("/users/alice/sessions", params={"limit": 9999}).json()["limit"] == 500
    flat_error(api.admin.get("/users/nobody/sessions"), 404, "USER_NOT_FOUND")
    flat_error(api.admin.put("/users/nobody/ttl", json={"new_ttl": 5}), 404, "USER_NOT_FOUND")


def test_the_ttl_of_a_users_blocks_changes_by_user_session_or_ids(api: AgentApi) -> None:
    api.session("alice", "s1")
    api.session("alice", "s2")
    ids = {}
    for sid in ("s1", "s2"):
        resp = api.admin.post(f"/users/alice/sessions/{sid}/memory", json={"facts": ["a", "b"]})
        ids[sid] = resp.json()["block_ids"]
    admin = api.admin
    assert admin.put("/users/alice/ttl", json={"new_ttl": 3600}).json()["updated_count"] == 4
    assert admin.put("/users/alice/ttl", json={"new_ttl": 60, "session_id": "s1"}).json()["updated_count"] == 2
    one = {"new_ttl": 0, "session_id": "s2", "block_ids": [ids["s2"][0], ids["s1"][0]]}
    assert admin.put("/users/alice/ttl", json=one).json()["updated_count"] == 1  # s1's block is not s2's
    flat_error(admin.put("/users/alice/ttl", json={"new_ttl": 5, "block_ids": ids["s1"]}), 400, "INVALID_REQUEST")
    flat_error(admin.put("/users/alice/ttl", json={"new_ttl": 5, "session_id": "s9"}), 404, "SESSION_NOT_FOUND")
    ttls = {b.id: b.ttl_s for b in api.memory.browse("alice").items}
    assert ttls[ids["s1"][0]] == 60 and ttls[ids["s2"][0]] == 0 and ttls[ids["s2"][1]] == 3600
    expired = api.memory.browse("alice").items[0]
    assert expired.expires_at is None or expired.expires_at > expired.ingest_time


def test_a_block_whose_ttl_ran_out_is_gone_at_once(api: AgentApi) -> None:
    api.session("alice", "s1", memory_blocks_ttl=1)
    resp = api.admin.post("/users/alice/sessions/s1/memory", json={"facts": ["short-lived"]})
    block_id = resp.json()["block_ids"][0]
    import time

    time.sleep(1.2)
    listed = api.admin.get("/users/alice/memory").json()
    assert listed["memory_blocks"] == [] and listed["total"] == 0
    found = api.admin.post("/users/alice/sessions/s1/memory/search", json={"filters": {"block_ids": [block_id]}})
    assert found.json()["count"] == 0
    update = api.admin.put(f"/users/alice/sessions/s1/memory/{block_id}", json={"fact": "x"})
    flat_error(update, 404, "BLOCK_NOT_FOUND")


def test_metadata_filters_match_values_as_strings(api: AgentApi) -> None:
    """That API's clients send every value as a string: a user whose metadata holds the number 3 is found by
    ``level=3``, as by the string "3"."""
    admin = api.admin
    admin.post("/users", json={"user_id": "a", "name": "A", "metadata": {"level": 3, "active": True, "tier": "gold"}})
    admin.post("/users", json={"user_id": "b", "name": "B", "metadata": {"level": "3", "tier": "silver"}})

    def found(*pairs: str) -> list[str]:
        body = admin.get("/users", params=[("metadata", p) for p in pairs]).json()
        assert body["total"] == body["count"]
        return [u["id"] for u in body["users"]]

    assert found("level=3") == ["a", "b"]
    assert found("level=3", "tier=gold") == ["a"]
    assert found("active=true") == ["a"] and found("active=True") == []
    assert found("tier=gold=yes") == []  # split on the first '=': the value is "gold=yes"


def test_a_missing_user_is_user_not_found_on_every_route_under_it(api: AgentApi) -> None:
    admin = api.admin
    for method, path, body in [
        ("POST", "/users/nobody/sessions/s1/memory", {"facts": ["x"]}),
        ("POST", "/users/nobody/sessions/s1/memory/search", {"query": "x"}),
        ("DELETE", "/users/nobody/sessions/s1/memory", {"block_ids": "all"}),
        ("PUT", "/users/nobody/sessions/s1/memory/b1", {"fact": "x"}),
        ("GET", "/users/nobody/sessions/s1", None),
        ("PUT", "/users/nobody/sessions/s1", {"metadata": {"a": "b"}}),
        ("POST", "/users/nobody/sessions/s1/end", None),
        ("DELETE", "/users/nobody/sessions/s1", None),
        ("PUT", "/users/nobody/ttl", {"new_ttl": 5, "session_id": "s1"}),
    ]:
        err = flat_error(admin.request(method, path, json=body), 404, "USER_NOT_FOUND")
        assert err["message"] == "user 'nobody' not found", (method, path, err)
    api.session("alice", "s1")
    err = flat_error(admin.post("/users/alice/sessions/s2/memory", json={"facts": ["x"]}), 404, "SESSION_NOT_FOUND")
    assert err["message"] == "session 's2' not found for user 'alice'"  # whole, its closing quote too
