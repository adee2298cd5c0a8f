"""OpenID Connect bearer tokens: RS256 JWTs verified against a configured JWKS file (keys and tokens made
here), a claim naming the user and one naming the role. A verified token is its user's key (its own paths
only, never another user's, never the admin key's routes); expired, forged, mis-addressed or unsigned
tokens are 401 with that API's codes; a read-only role is 403 on writes; memlane's own keys keep working
beside them, and /v1 takes the tokens too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

jwt = pytest.importorskip("jwt", reason="OIDC tokens need PyJWT (pip install 'memlane[oidc]')")
from agent_memory_support import AgentApi, flat_error, make_api  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from jwt.algorithms import RSAAlgorithm  # noqa: E402

from memlane.core.errors import ConfigError  # noqa: E402
from memlane.core.store.sqlite import SqliteStore  # noqa: E402
from memlane.interfaces.http.oidc import OidcVerifier  # noqa: E402
from memlane.interfaces.wire.oidc import OidcSettings  # noqa: E402

ISSUER = "https://idp.example/realms/agents"
AUDIENCE = "memlane"


def rsa_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def signing_key() -> Any:
    return rsa_key()


@pytest.fixture
def oidc_api(tmp_path: Path, signing_key: Any) -> Iterator[AgentApi]:
    jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    settings = OidcSettings(jwks, issuer=ISSUER, audience=AUDIENCE, user_claim="preferred_username")
    made = make_api(SqliteStore(tmp_path / "oidc.db"), oidc=settings)
    yield made
    made.close()


def token(key: Any, user: str | None = "alice", role: Any = "ams_rw", **claims: Any) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, "role": role, **claims}
    if user is not None:
        body["preferred_username"] = user
    return str(jwt.encode(body, key, algorithm="RS256", headers={"kid": claims.pop("kid", "k1")}))


def test_a_token_acts_as_its_users_key(oidc_api: AgentApi, signing_key: Any) -> None:
    alice = oidc_api.client(token(signing_key))
    assert alice.post("/users", json={"user_id": "alice", "name": "Alice"}).status_code == 201  # its own id
    assert alice.post("/users/alice/sessions", json={"session_id": "s1"}).status_code == 201
    assert alice.post("/users/alice/sessions/s1/memory", json={"facts": ["likes tea"]}).status_code == 201
    assert alice.get("/users/alice/memory").json()["total"] == 1
    oidc_api.admin.post("/users", json={"user_id": "bob", "name": "Bob"})
    flat_error(alice.get("/users/bob"), 403, "FORBIDDEN")
    flat_error(alice.post("/users", json={"user_id": "carol", "name": "Carol"}), 403, "FORBIDDEN")
    flat_error(alice.get("/users"), 403, "FORBIDDEN")  # the admin key's route
    assert alice.post("/v1/search", json={"query": "tea"}).status_code == 200  # memlane's own API too
    assert oidc_api.client(oidc_api.user_key("bob")).get("/users/bob").status_code == 200  # keys still work


def test_roles_come_from_the_role_claim(oidc_api: AgentApi, signing_key: Any) -> None:
    oidc_api.session("alice", "s1")
    reader = oidc_api.client(token(signing_key, role="ams_ro"))
    assert reader.post("/users/alice/sessions/s1/memory/search", json={"query": "x"}).status_code == 200
    flat_error(reader.post("/users/alice/sessions/s1/memory", json={"facts": ["x"]}), 403, "FORBIDDEN")
    flat_error(oidc_api.client(token(signing_key, role=None)).put("/users/alice", json={"name": "x"}), 403)
    writer = oidc_api.client(token(signing_key, role=["ams_ro", "ams_rw"]))  # a list: the highest
    assert writer.post("/users/alice/sessions/s1/memory", json={"facts": ["x"]}).status_code == 201
    prompt = {"prompt_id": "p", "prompt": "t", "description": "d"}
    flat_error(writer.post("/prompts", json=prompt), 403, "FORBIDDEN")
    assert oidc_api.client(token(signing_key, role="ams_admin")).post("/prompts", json=prompt).status_code == 201


def test_bad_tokens_are_401(oidc_api: AgentApi, signing_key: Any) -> None:
    now = int(time.time())
    expired = token(signing_key, exp=now - 3600, iat=now - 7200)
    flat_error(oidc_api.client(expired).get("/users/alice"), 401, "TOKEN_EXPIRED")
    forged = token(rsa_key())  # signed by another key under the same kid
    bad = [
        forged,
        token(signing_key, kid="unknown"),
        token(signing_key, iss="https://elsewhere.example"),
        token(signing_key, aud="another-service"),
        token(signing_key, user=None),
        token(signing_key)[:-4] + "AAAA",
        str(jwt.encode({"preferred_username": "alice", "exp": now + 60}, "a-shared-secret-of-32-bytes-long!", "HS256")),
    ]
    for t in bad:
        flat_error(oidc_api.client(t).get("/users/alice"), 401, "INVALID_TOKEN")
    no_exp = str(jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "preferred_username": "alice"}, signing_key, "RS256",
                            headers={"kid": "k1"}))  # fmt: skip
    flat_error(oidc_api.client(no_exp).get("/users/alice"), 401, "INVALID_TOKEN")
    v1 = oidc_api.client(expired).get("/v1/memories")
    assert v1.status_code == 401 and v1.json()["error"]["code"] == "unauthorized"  # /v1 keeps its body


def test_tokens_are_refused_where_oidc_is_not_configured(sqlite_api: AgentApi, signing_key: Any) -> None:
    flat_error(sqlite_api.client(token(signing_key)).get("/users/alice"), 401, "INVALID_TOKEN")


def test_an_unusable_key_set_stops_the_start(tmp_path: Path) -> None:
    missing = OidcSettings(tmp_path / "none.json")
    with pytest.raises(ConfigError, match="cannot read the OIDC key set"):
        OidcVerifier(missing)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"keys": []}))
    with pytest.raises(ConfigError):
        OidcVerifier(OidcSettings(empty))


def test_memlane_serve_takes_tokens_with_oidc_jwks(tmp_path: Path, signing_key: Any) -> None:
    import os
    import signal
    import subprocess
    import sys

    import httpx
    from http_support import ADMIN_KEY, CLI, wait_for_port

    jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update({"MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": str(tmp_path / "s.db"), "MEMLANE_EMBEDDER": "hashing"})
    args = ["--oidc-jwks", str(jwks), "--oidc-issuer", ISSUER, "--oidc-audience", AUDIENCE]
    cmd = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0", *args]
    env["MEMLANE_OIDC_USER_CLAIM"] = "preferred_username"
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        base = f"http://127.0.0.1:{wait_for_port(proc, lines)}"
        bearer = {"Authorization": f"Bearer {token(signing_key)}"}
        made = httpx.post(f"{base}/users", json={"user_id": "alice", "name": "Alice"}, headers=bearer, timeout=10)
        assert made.status_code == 201, made.text
        other = httpx.get(f"{base}/users/bob", headers=bearer, timeout=10)
        assert other.status_code == 403
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_token_with_the_admin_role_acts_on_any_user(oidc_api: AgentApi, signing_key: Any) -> None:
    service = oidc_api.client(token(signing_key, user="agents-service", role="ams_admin"))
    for user in ("alice", "bob"):  # one token for every end user, as the admin key
        assert service.post("/users", json={"user_id": user, "name": user.title()}).status_code == 201
        assert service.post(f"/users/{user}/sessions", json={"session_id": "s1"}).status_code == 201
        add = {"facts": [f"{user} likes tea"]}
        assert service.post(f"/users/{user}/sessions/s1/memory", json=add).status_code == 201
    assert [u["id"] for u in service.get("/users").json()["users"]] == ["alice", "bob"]
    found = service.post("/users/bob/sessions/s1/memory/search", json={"query": "tea"}).json()["memory_blocks"]
    assert [b["fact"] for b in found] == ["bob likes tea"]  # each user's own memories, never another's
    assert service.delete("/users/alice").status_code == 204
    flat_error(service.get("/users/alice"), 404, "USER_NOT_FOUND")  # a deleted user stays deleted
    # memlane's own routes take the user from the credential: there the token is its own user's
    assert service.get("/v1/whoami").json()["user"] == "agents-service"
    # a token without the admin role, or one that does not verify, still reaches its own user only
    writer = oidc_api.client(token(signing_key, user="agents-service", role=["ams_ro", "ams_rw"]))
    flat_error(writer.get("/users/bob"), 403, "FORBIDDEN")
    flat_error(writer.get("/users"), 403, "FORBIDDEN")
    for bad in (token(rsa_key(), user="agents-service", role="ams_admin"), token(signing_key, role="ams_admin")[:-4]):
        flat_error(oidc_api.client(bad).get("/users/bob"), 401, "INVALID_TOKEN")
    # memlane keys with the admin role stay their user's (the role writes the shared prompt registry)
    flat_error(oidc_api.client(oidc_api.user_key("carol", "admin")).get("/users/bob"), 403, "FORBIDDEN")
