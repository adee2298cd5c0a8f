"""Auth on every route: no key or an unknown key is 401, a key of the wrong scope is 403, and the table of
routes below must name every route the app has, so a new route cannot slip in unguarded."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

import pytest
from http_support import ADMIN_KEY, Service, chat

from memlane.core.errors import ConfigError, ValidationError
from memlane.interfaces.http import create_app
from memlane.interfaces.http.agent_memory import serves
from memlane.interfaces.http.server import check_admin_key, is_loopback

# (method, path template) -> who may call it, and a valid body.
ROUTES: dict[tuple[str, str], tuple[str, dict[str, Any] | None]] = {
    ("POST", "/v1/users"): ("admin", {"user": "carol"}),
    ("GET", "/v1/users"): ("admin", None),
    ("POST", "/v1/users/{user}/keys"): ("admin", {"label": "x"}),
    ("GET", "/v1/users/{user}/keys"): ("admin", None),
    ("DELETE", "/v1/users/{user}/keys/{key_id}"): ("admin", None),
    ("GET", "/metrics"): ("admin", None),
    ("DELETE", "/v1/users/{user}"): ("admin_or_self", None),
    ("POST", "/v1/memories"): ("user", {"messages": chat("hello", "hi")}),
    ("POST", "/v1/search"): ("user", {"query": "hello"}),
    ("GET", "/v1/memories"): ("user", None),
    ("GET", "/v1/memories/{block_id}"): ("user", None),
    ("DELETE", "/v1/memories/{block_id}"): ("user", None),
    ("GET", "/v1/queue"): ("any", None),
    ("POST", "/v1/queue/retry"): ("admin", {"dead_only": True}),
    ("GET", "/healthz"): ("public", None),
    ("GET", "/v1/retention"): ("admin", None),
    ("PUT", "/v1/retention/default"): ("admin", {"max_age_days": 90}),
    ("DELETE", "/v1/retention/default"): ("admin", None),
    ("POST", "/v1/retention/apply"): ("admin", {"dry_run": True}),
    ("GET", "/v1/users/{user}/retention"): ("admin_or_self", None),
    ("PUT", "/v1/users/{user}/retention"): ("admin", {"max_blocks": 10}),
    ("DELETE", "/v1/users/{user}/retention"): ("admin", None),
    ("GET", "/v1/whoami"): ("any", None),
    ("GET", "/v1/llm"): ("any", None),
    ("GET", "/v1/users/{user}/memories"): ("admin_or_self", None),
    ("GET", "/v1/users/{user}/memories/{block_id}"): ("admin_or_self", None),
    ("POST", "/v1/users/{user}/search"): ("admin_or_self", {"query": "hello"}),
    ("GET", "/v1/users/{user}/sessions"): ("admin_or_self", None),
    ("GET", "/v1/users/{user}/sessions/{session_id}"): ("admin_or_self", None),
    ("GET", "/v1/users/{user}"): ("admin_or_self", None),
    ("PATCH", "/v1/users/{user}"): ("admin_or_self", {"display_name": "Bob"}),
    ("POST", "/v1/facts"): ("user", {"facts": ["A fact."]}),
    ("POST", "/v1/exchanges"): ("user", {"exchanges": [{"user_content": "hi"}]}),
    ("PATCH", "/v1/memories/{block_id}"): ("user", {"content": "new"}),
    ("PUT", "/v1/memories/{block_id}"): ("user", {"content": "new"}),
    ("GET", "/v1/memories/{block_id}/status"): ("user", None),
    ("POST", "/v1/memories/{block_id}/requeue"): ("user", None),
    ("POST", "/v1/memories/ttl"): ("user", {"ttl_s": 60}),
    ("POST", "/v1/browse"): ("user", {}),
    ("POST", "/v1/sessions"): ("user", {"session_id": "s1"}),
    ("GET", "/v1/sessions"): ("user", None),
    ("GET", "/v1/sessions/{session_id}"): ("user", None),
    ("PATCH", "/v1/sessions/{session_id}"): ("user", {"metadata": {}}),
    ("POST", "/v1/sessions/{session_id}/end"): ("user", None),
    ("DELETE", "/v1/sessions/{session_id}"): ("user", None),
    ("POST", "/v1/prompts"): ("admin", {"prompt_id": "p1", "text": "Extract."}),
    ("GET", "/v1/prompts"): ("any", None),
    ("GET", "/v1/prompts/{prompt_id}"): ("any", None),
    ("GET", "/v1/prompts/{prompt_id}/versions"): ("any", None),
    ("GET", "/v1/prompts/{prompt_id}/versions/{version}"): ("any", None),
    ("PATCH", "/v1/prompts/{prompt_id}"): ("admin", {"description": "x"}),
    ("POST", "/v1/prompts/{prompt_id}/archive"): ("admin", None),
    ("DELETE", "/v1/prompts/{prompt_id}"): ("admin", None),
}


def concrete(path: str, user: str = "bob") -> str:
    for name, value in (
        ("{user}", user),
        ("{key_id}", "0123456789ab"),
        ("{block_id}", "01a2b3c4d5e6f7"),
        ("{session_id}", "s1"),
        ("{prompt_id}", "p1"),
        ("{version}", "0"),
    ):
        path = path.replace(name, value)
    return path


def call(client: Any, method: str, path: str, body: dict[str, Any] | None) -> Any:
    return client.request(method, concrete(path), json=body)


def test_the_table_names_every_route(service: Service) -> None:
    # The Agent Memory routes have their own table (test_agent_memory_auth.py).
    paths = {p: ops for p, ops in service.app.openapi()["paths"].items() if not serves(p)}
    assert {(m.upper(), p) for p, ops in paths.items() for m in ops} == set(ROUTES)


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] != "public"))
def test_no_key_bad_key_or_malformed_header_is_401(service: Service, method: str, path: str) -> None:
    body = ROUTES[(method, path)][1]
    for headers in ({}, {"Authorization": "Bearer mlk_0123456789ab_wrong"}, {"Authorization": "Basic Zm9vOmJhcg=="}):
        resp = service.client().request(method, concrete(path), json=body, headers=headers)
        assert resp.status_code == 401, (headers, resp.text)
        assert resp.headers["www-authenticate"] == "Bearer"
        assert resp.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] == "admin"))
def test_a_user_key_on_an_admin_route_is_403(service: Service, method: str, path: str) -> None:
    key = service.new_user("bob")
    resp = call(service.client(key), method, path, ROUTES[(method, path)][1])
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] == "user"))
def test_the_admin_key_on_a_user_route_is_403(service: Service, method: str, path: str) -> None:
    resp = call(service.admin, method, path, ROUTES[(method, path)][1])
    assert resp.status_code == 403


# Every route a user's key may write through (searches and browsing take a POST but only read).
READ_ONLY_WRITES = sorted(
    (m, p)
    for (m, p), (who, _) in ROUTES.items()
    if who in ("user", "admin_or_self") and m != "GET" and p not in ("/v1/search", "/v1/browse")
)


@pytest.mark.parametrize(("method", "path"), READ_ONLY_WRITES)
def test_a_read_only_key_is_403_on_every_write(service: Service, method: str, path: str) -> None:
    service.new_user("bob")
    made = service.admin.post("/v1/users/bob/keys", json={"label": "ro", "role": "read-only"})
    assert made.status_code == 201 and made.json()["role"] == "read-only"
    reader = service.client(made.json()["key"])
    resp = call(reader, method, path, ROUTES[(method, path)][1])
    assert resp.status_code == 403 and "read-only" in resp.json()["error"]["message"]
    assert service.memory.count("bob") == 0 and service.memory.users()[0].name == "bob"  # nothing written
    assert service.memory.list_sessions("bob").total == 0


def test_a_read_only_key_reads_and_searches(service: Service) -> None:
    writer = service.new_user("bob")
    assert service.client(writer).post("/v1/memories", json={"messages": chat("hello", "hi")}).status_code == 201
    made = service.admin.post("/v1/users/bob/keys", json={"role": "read-only"}).json()
    reader = service.client(made["key"])
    assert len(reader.get("/v1/memories").json()) == 2
    assert reader.post("/v1/search", json={"query": "hello"}).status_code == 200
    assert reader.post("/v1/browse", json={}).status_code == 200
    roles = {k["key_id"]: k["role"] for k in service.admin.get("/v1/users/bob/keys").json()}
    assert roles[made["key_id"]] == "read-only" and sorted(roles.values()) == ["read-only", "read-write"]
    bad = service.admin.post("/v1/users/bob/keys", json={"role": "root"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "role"


def test_a_user_may_delete_themself_but_not_another(service: Service) -> None:
    alice, bob = service.new_user("alice"), service.new_user("bob")
    assert service.client(alice).delete("/v1/users/bob").status_code == 403
    assert service.client(alice).delete("/v1/users/nobody").status_code == 403  # 403 whether or not it exists
    assert service.client(bob).delete("/v1/users/bob").status_code == 200
    assert service.client(bob).get("/v1/memories").status_code == 401  # the key went with the user
    assert service.client(alice).get("/v1/memories").status_code == 200


def test_health_and_the_docs_are_public(service: Service) -> None:
    assert service.client().get("/healthz").status_code == 200
    assert service.client().get("/openapi.json").status_code == 200


def test_keys_are_stored_hashed_shown_once_and_revocable(service: Service) -> None:
    key = service.new_user("alice")
    secret = key.split("_", 2)[2]
    path = service.memory.store.path  # type: ignore[attr-defined]
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT k.key_id, u.name, k.secret_sha256 FROM api_keys k JOIN users u ON u.id = k.user_id"
        ).fetchall()
    assert len(rows) == 1 and rows[0][1] == "alice"
    assert rows[0][2] == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in path.read_bytes().decode("latin-1")
    listed = service.admin.get("/v1/users/alice/keys").json()
    assert [k["key_id"] for k in listed] == [rows[0][0]] and "key" not in listed[0]
    assert service.client(key).get("/v1/memories").status_code == 200
    assert service.admin.delete(f"/v1/users/alice/keys/{rows[0][0]}").status_code == 204
    assert service.client(key).get("/v1/memories").status_code == 401
    assert service.admin.delete(f"/v1/users/alice/keys/{rows[0][0]}").status_code == 404


def test_a_key_only_works_with_its_own_secret(service: Service) -> None:
    key = service.new_user("alice")
    prefix, key_id, secret = key.split("_", 2)
    for forged in (f"{prefix}_{key_id}_{secret[:-1]}", f"{prefix}_{key_id}_", f"xx_{key_id}_{secret}", key_id):
        assert service.client(forged).get("/v1/memories").status_code == 401


def test_keys_for_unknown_users_are_refused(service: Service) -> None:
    resp = service.admin.post("/v1/users/ghost/keys", json={})
    assert resp.status_code == 404 and "ghost" in resp.json()["error"]["message"]


def test_a_recreated_user_does_not_inherit_old_keys(service: Service) -> None:
    key = service.new_user("alice")
    service.memory.delete_user("alice")  # as `memlane delete-user` would, behind the service's back
    assert service.admin.post("/v1/users", json={"user": "alice"}).json()["created"] is True
    assert service.client(key).get("/v1/memories").status_code == 401


def test_the_admin_key_is_required_unless_insecure_dev(service: Service) -> None:
    with pytest.raises(ConfigError):
        create_app(service.memory, admin_key=None)
    with pytest.raises(ValidationError, match="at least 16"):  # bad input: `memlane serve` exits 2
        create_app(service.memory, admin_key="short")
    check_admin_key(ADMIN_KEY, insecure_dev=False, host="0.0.0.0")
    check_admin_key(None, insecure_dev=True, host="127.0.0.1")
    check_admin_key(None, insecure_dev=True, host="::1")
    with pytest.raises(ConfigError, match="MEMLANE_ADMIN_KEY"):
        check_admin_key(None, insecure_dev=False, host="127.0.0.1")
    with pytest.raises(ConfigError, match="loopback"):
        check_admin_key(None, insecure_dev=True, host="0.0.0.0")
    assert is_loopback("localhost") and is_loopback("127.0.0.2") and not is_loopback("192.0.2.1")


def test_insecure_dev_opens_admin_routes_only(service: Service) -> None:
    from sync_asgi import SyncASGITransport

    app = create_app(service.memory, admin_key=None, insecure_dev=True)
    transport = SyncASGITransport(app)
    try:
        import httpx

        client = httpx.Client(base_url="http://localhost", transport=transport)  # dev mode is loopback only
        assert client.post("/v1/users", json={"user": "dev"}).status_code == 201
        key = client.post("/v1/users/dev/keys").json()["key"]
        assert client.get("/v1/memories").status_code == 403  # no key = admin, who has no memories
        assert client.get("/v1/memories", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    finally:
        transport.shutdown()


def test_the_documented_answers_of_the_creates_and_of_the_routes(service: Service) -> None:
    """What the API's description says a route may answer: the errors every route of the /v1 routers may
    answer, the LLM's 502 for the memory routes, and a create's 201 (new), 409 (exists) or 200 (accepted)."""
    paths = service.app.openapi()["paths"]
    common = {"400", "401", "403", "404", "413", "422", "503"}
    for path, method, model, existed in (
        ("/v1/users", "post", "UserCreated", "It existed."),
        ("/v1/sessions", "post", "SessionOut", "It existed (exist_ok)."),
    ):
        answers = paths[path][method]["responses"]
        assert set(answers) == common | {"200", "201", "409"}, path
        for code in ("201", "200"):
            schema = answers[code]["content"]["application/json"]["schema"]["$ref"]
            assert schema.rpartition("/")[2].endswith(model), (path, code)
        assert answers["200"]["description"] == existed
    assert set(paths["/v1/users/{user}/keys/{key_id}"]["delete"]["responses"]) >= common
    assert set(paths["/v1/search"]["post"]["responses"]) >= common | {"502"}
    assert "502" not in paths["/v1/prompts"]["post"]["responses"]
