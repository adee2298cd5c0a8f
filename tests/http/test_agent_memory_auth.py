"""Auth on every Agent Memory route (the table must name all 30, so a new one cannot slip in unguarded):
no key or an unknown key is 401 (only /health is public); the admin key acts on any user in the path; a
user's key only on its own user's paths (403 on another's, whether it exists or not, and nothing of it is
shown or changed); a read-only key is 403 on every write; the prompt registry is written by the admin key
or a key with the admin role; insecure dev mode needs no key."""

from __future__ import annotations

from typing import Any

import pytest
from agent_memory_support import AgentApi, flat_error
from http_support import TEST_HOSTS
from sync_asgi import SyncASGITransport

from memlane.core.apikeys import ApiKeys
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.agent_memory import serves
from memlane.interfaces.http.settings import HttpSettings

S = "/users/{user}/sessions/{session}"
# (method, path) -> who may call it: public, admin (the admin key only), read / write (the path user's key,
# by role), registry-read / registry-write (the prompt registry), any (any valid key); and a valid body.
ROUTES: dict[tuple[str, str], tuple[str, Any]] = {
    ("GET", "/health"): ("public", None),
    ("GET", "/health/couchbase"): ("any", None),
    ("GET", "/health/models"): ("any", None),
    ("GET", "/health/async-batch-processor"): ("any", None),
    ("GET", "/health/async-batch-processor-stats"): ("any", None),
    ("GET", "/health/memory"): ("any", None),
    ("POST", "/users"): ("write", {"user_id": "{user}", "name": "Someone"}),
    ("GET", "/users"): ("admin", None),
    ("GET", "/users/{user}"): ("read", None),
    ("PUT", "/users/{user}"): ("write", {"name": "Renamed"}),
    ("DELETE", "/users/{user}"): ("write", None),
    ("PUT", "/users/{user}/ttl"): ("write", {"new_ttl": 60}),
    ("POST", "/users/{user}/sessions"): ("write", {"session_id": "new"}),
    ("GET", "/users/{user}/sessions"): ("read", None),
    ("GET", S): ("read", None),
    ("PUT", S): ("write", {"metadata": {"k": "v"}}),
    ("DELETE", S): ("write", None),
    ("POST", S + "/end"): ("write", None),
    ("POST", S + "/memory"): ("write", {"facts": ["a fact"]}),
    ("PUT", S + "/memory/{block}"): ("write", {"fact": "changed"}),
    ("DELETE", S + "/memory"): ("write", {"block_ids": ["{block}"]}),
    ("POST", S + "/memory/search"): ("read", {"query": "fact"}),
    ("GET", "/users/{user}/memory"): ("read", None),
    ("POST", "/prompts"): ("registry-write", {"prompt_id": "p2", "prompt": "t", "description": "d"}),
    ("GET", "/prompts"): ("registry-read", None),
    ("GET", "/prompts/{prompt}"): ("registry-read", None),
    ("PUT", "/prompts/{prompt}"): ("registry-write", {"description": "new"}),
    ("DELETE", "/prompts/{prompt}?vid=all"): ("registry-write", None),
    ("GET", "/prompts/{prompt}/versions"): ("registry-read", None),
    ("PUT", "/prompts/{prompt}/archive?vid=all"): ("registry-write", None),
}


def fill(text: Any, user: str, block: str) -> Any:
    if isinstance(text, str):
        return (
            text.replace("{user}", user).replace("{session}", "s1").replace("{block}", block).replace("{prompt}", "p1")
        )
    if isinstance(text, dict):
        return {k: fill(v, user, block) for k, v in text.items()}
    if isinstance(text, list):
        return [fill(v, user, block) for v in text]
    return text


def seed(api: AgentApi, user: str) -> str:
    """``user`` with session s1 holding one block (its id), and prompt p1."""
    api.session(user, "s1")
    resp = api.admin.post(f"/users/{user}/sessions/s1/memory", json={"facts": ["a fact of " + user]})
    api.admin.post("/prompts", json={"prompt_id": "p1", "prompt": "t", "description": "d"})
    return str(resp.json()["block_ids"][0])


def call(client: Any, method: str, path: str, body: Any, user: str, block: str) -> Any:
    url = fill(path, user, block)
    return (
        client.request(method, url, json=fill(body, user, block)) if body is not None else client.request(method, url)
    )


def test_the_table_names_every_route(sqlite_api: AgentApi) -> None:
    paths = sqlite_api.app.openapi()["paths"]
    served = {(m.upper(), p) for p, ops in paths.items() for m in ops if serves(p)}
    table = {
        (m, p.split("?")[0].replace("{user}", "{user_id}").replace("{session}", "{session_id}")) for m, p in ROUTES
    }
    table = {(m, p.replace("{block}", "{block_id}").replace("{prompt}", "{prompt_id}")) for m, p in table}
    assert len(ROUTES) == 30 and served == table


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] != "public"))
def test_no_key_or_an_unknown_key_is_401(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "alice")
    for client in (sqlite_api.client(), sqlite_api.client("mlk_0123456789ab_wrong"), sqlite_api.client("not-a-key")):
        flat_error(call(client, method, path, ROUTES[(method, path)][1], "alice", block), 401, "INVALID_TOKEN")
    assert sqlite_api.memory.count("alice") == 1


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] in ("read", "write", "admin")))
def test_a_user_key_never_reaches_another_user(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "bob")
    alice = sqlite_api.client(sqlite_api.user_key("alice", "admin"))  # even the admin role stays in its user
    for target in ("bob", "nobody"):  # 403 whether or not the user exists
        resp = call(alice, method, path, ROUTES[(method, path)][1], target, block)
        flat_error(resp, 403, "FORBIDDEN")
        assert "bob" not in resp.text and "a fact" not in resp.text
    assert sqlite_api.memory.count("bob") == 1 and sqlite_api.memory.get("bob", block).message == "a fact of bob"


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] in ("read", "write")))
def test_a_user_key_acts_on_its_own_user(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "alice")
    own = sqlite_api.client(sqlite_api.user_key("alice"))
    resp = call(own, method, path, ROUTES[(method, path)][1], "alice", block)
    if (method, path) == ("POST", "/users"):
        flat_error(resp, 409, "ALREADY_EXISTS")  # a key's user exists
    else:
        assert resp.status_code < 300, resp.text


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] != "public"))
def test_the_admin_key_acts_on_any_user(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "bob")
    body = ROUTES[(method, path)][1]
    if (method, path) == ("POST", "/users"):
        body = {"user_id": "carol", "name": "Carol"}
    assert call(sqlite_api.admin, method, path, body, "bob", block).status_code < 300


@pytest.mark.parametrize(
    ("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] in ("write", "registry-write"))
)
def test_a_read_only_key_is_403_on_every_write(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "alice")
    reader = sqlite_api.client(sqlite_api.user_key("alice", "read-only"))
    flat_error(call(reader, method, path, ROUTES[(method, path)][1], "alice", block), 403, "FORBIDDEN")
    assert sqlite_api.memory.get("alice", block).message == "a fact of alice"
    assert sqlite_api.memory.get_session("alice", "s1").ended_at is None
    assert sqlite_api.memory.prompts.get("p1").description == "d"


@pytest.mark.parametrize(
    ("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] in ("read", "registry-read", "any"))
)
def test_a_read_only_key_reads_and_searches(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "alice")
    reader = sqlite_api.client(sqlite_api.user_key("alice", "read-only"))
    assert call(reader, method, path, ROUTES[(method, path)][1], "alice", block).status_code == 200


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ROUTES.items() if v[0] == "registry-write"))
def test_the_registry_is_written_by_the_admin_role_only(sqlite_api: AgentApi, method: str, path: str) -> None:
    block = seed(sqlite_api, "alice")
    body = ROUTES[(method, path)][1]
    writer = sqlite_api.client(sqlite_api.user_key("alice", "read-write"))
    flat_error(call(writer, method, path, body, "alice", block), 403, "FORBIDDEN")
    admin_role = sqlite_api.client(sqlite_api.user_key("alice", "admin"))
    assert call(admin_role, method, path, body, "alice", block).status_code < 300


def test_insecure_dev_needs_no_key(tmp_path: Any) -> None:
    memory = Memory(SqliteStore(tmp_path / "dev.db"), HashingEmbedder())
    app = create_app(memory, admin_key=None, insecure_dev=True, settings=HttpSettings(allowed_hosts=TEST_HOSTS))
    transport = SyncASGITransport(app)
    try:
        import httpx

        client = httpx.Client(base_url="http://memlane.test", transport=transport)
        assert client.post("/users", json={"user_id": "dev", "name": "Dev"}).status_code == 201
        assert client.post("/users/dev/sessions", json={"session_id": "s"}).status_code == 201
        assert client.post("/users/dev/sessions/s/memory", json={"facts": ["x"]}).status_code == 201
        key = ApiKeys(memory.store).create("dev").key  # a key still binds to its user there
        other = httpx.Client(
            base_url="http://memlane.test", transport=transport, headers={"Authorization": f"Bearer {key}"}
        )
        client.post("/users", json={"user_id": "eve", "name": "Eve"})
        flat_error(other.get("/users/eve"), 403, "FORBIDDEN")
    finally:
        transport.shutdown()
        memory.close()
