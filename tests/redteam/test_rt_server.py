"""The server's own edges: a weak admin key refused at start (exit 2), error bodies without paths, SQL or
stack frames (the detail in the log under the request id the body gives), and the Host / Origin checks
against DNS rebinding, on the HTTP service and on the MCP streamable HTTP transport."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import Service, chat, make_service
from redteam_support import ADMIN_KEY, assert_clean_refusal, run_cli, served

from memlane.core.apikeys import ApiKeys
from memlane.core.memory import Memory
from memlane.interfaces.http.app import usable_admin_key
from memlane.interfaces.http.settings import HttpSettings
from memlane.interfaces.wire.hosts import allowed_hosts, host_allowed

# -- the admin key -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (" " * 20, "empty"),
        ("\t\n  \t", "empty"),
        ("short-key", "9 characters"),
        ("   fifteen-chars   ", "at least 16"),
        ("sixteen-chars-é-key-x", "ASCII"),
    ],
    ids=["spaces", "whitespace", "short", "short-after-trim", "non-ascii"],
)
def test_serve_refuses_a_weak_admin_key_with_exit_2(tmp_path: Path, key: str, message: str) -> None:
    env = {"MEMLANE_STORE": str(tmp_path / "s.db"), "MEMLANE_EMBEDDER": "hashing", "MEMLANE_ADMIN_KEY": key}
    res = run_cli(["serve", "--workers", "0", "--port", "0"], env)
    assert_clean_refusal(res, "MEMLANE_ADMIN_KEY", message)
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened


def test_an_admin_key_is_used_trimmed() -> None:
    assert usable_admin_key("  0123456789abcdef \n") == "0123456789abcdef"


# -- error bodies --------------------------------------------------------------------------------------------


@pytest.fixture
def http(tmp_path: Path) -> Any:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


def break_store(path: Path) -> None:
    """What a damaged or half-migrated file does: the blocks table is gone."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("ALTER TABLE blocks RENAME TO blocks_elsewhere")
    finally:
        conn.close()


def assert_no_internals(text: str, folder: Path) -> None:
    for leak in (str(folder), ".db", "blocks", "sqlite", "SELECT", "INSERT", "Traceback", 'File "'):
        assert leak not in text, (leak, text)


def test_a_store_failure_body_has_no_path_or_sql_and_the_log_has_it(
    http: Service, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    alice = http.client(http.new_user("alice"))
    assert alice.post("/v1/memories", json={"messages": chat("I keep bees", "Nice")}).status_code == 201
    break_store(tmp_path / "http.db")
    with caplog.at_level(logging.ERROR, logger="memlane.http"):
        for resp in (
            alice.post("/v1/memories", json={"messages": chat("more bees", "ok")}),
            alice.get("/v1/memories"),
            alice.post("/v1/search", json={"query": "bees"}),
        ):
            assert resp.status_code == 503, resp.text
            err = resp.json()["error"]
            rid = resp.headers["X-Request-ID"]
            assert err["code"] == "unavailable" and err["request_id"] == rid and rid in err["message"]
            assert_no_internals(resp.text, tmp_path)
            logged = [r.getMessage() for r in caplog.records if rid in r.getMessage()]
            assert logged and str(tmp_path) in logged[0] and "blocks" in logged[0], caplog.text


def test_an_unexpected_error_body_has_no_stack_frames(
    http: Service, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    http.transport._inner = httpx.ASGITransport(app=http.app, raise_app_exceptions=False)
    alice = http.client(http.new_user("alice"))

    def boom(*_: object, **__: object) -> None:
        raise RuntimeError(f"SELECT secret FROM {tmp_path}/inner.db")

    monkeypatch.setattr(http.memory, "search", boom)
    with caplog.at_level(logging.ERROR, logger="memlane.http"):
        resp = alice.post("/v1/search", json={"query": "bees"}, headers={"X-Request-ID": "client-trace-42"})
    assert resp.status_code == 500 and resp.json()["error"]["code"] == "internal_error"
    assert resp.headers["X-Request-ID"] == "client-trace-42" == resp.json()["error"]["request_id"]
    assert_no_internals(resp.text, tmp_path)
    record = next(r for r in caplog.records if "client-trace-42" in r.getMessage())
    assert record.exc_info is not None and "SELECT secret" in str(record.exc_info[1])


def test_every_answer_carries_a_request_id(http: Service) -> None:
    client = http.client()
    for resp in (client.get("/healthz"), client.get("/v1/memories"), client.get("/nope")):
        rid = resp.headers["X-Request-ID"]
        assert len(rid) == 32
        if resp.status_code >= 400:
            assert resp.json()["error"]["request_id"] == rid
    forged = client.get("/healthz", headers={"X-Request-ID": "a b\tc"}).headers["X-Request-ID"]
    assert forged != "a b\tc" and len(forged) == 32  # not a valid id: a new one, never the header echoed


def test_health_failure_detail_stays_in_the_log(http: Service, tmp_path: Path) -> None:
    break_store(tmp_path / "http.db")
    conn = sqlite3.connect(tmp_path / "http.db", isolation_level=None)
    conn.execute("DROP TABLE meta")
    conn.close()
    resp = http.client().get("/healthz")
    assert resp.status_code == 503 and resp.json()["store"]["detail"]["writable"] is False
    assert_no_internals(resp.text, tmp_path)


# -- Host and Origin -----------------------------------------------------------------------------------------


def test_the_allowlist() -> None:
    loopback = allowed_hosts([])
    assert loopback == ("localhost", "127.0.0.1", "[::1]")
    for host in ("localhost", "localhost:8420", "127.0.0.1:1", "[::1]:8420", "LOCALHOST.", "[::1]"):
        assert host_allowed(host, loopback), host
    for host in ("evil.example", "127.0.0.1.evil.example", "localhost.evil.example:8420", "", None, "[::2]"):
        assert not host_allowed(host, loopback), host
    assert host_allowed("10.0.0.5:8420", allowed_hosts([], "10.0.0.5"))
    assert not host_allowed("10.0.0.5", allowed_hosts([], "0.0.0.0"))  # a wildcard address names no host
    assert host_allowed("api.example.com", allowed_hosts(["api.example.com", "::1"], "0.0.0.0"))
    assert host_allowed("anything", allowed_hosts(["*"]))


def test_a_foreign_host_is_421_except_on_healthz(tmp_path: Path) -> None:
    svc = make_service(tmp_path, name="hosts", settings=HttpSettings(allowed_hosts=allowed_hosts([])))
    try:
        admin = svc.admin
        resp = admin.get("http://rebound.attacker.example/v1/users")
        assert resp.status_code == 421 and resp.json()["error"]["code"] == "misdirected_request"
        assert "--allowed-hosts" in resp.json()["error"]["message"]
        assert admin.get("http://localhost:8420/v1/users").status_code == 200
        assert admin.get("http://127.0.0.1/v1/users").status_code == 200
        assert admin.get("http://rebound.attacker.example/healthz").status_code == 200
    finally:
        svc.close()


def test_memlane_serve_checks_host_on_a_real_socket(tmp_path: Path) -> None:
    env = {"MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": str(tmp_path / "served.db")}
    args = ["serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0", "--allowed-hosts", "memory.internal"]
    with served(args, env) as srv:
        auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
        for host, status in (("memory.internal", 200), (f"127.0.0.1:{srv.port}", 200), ("evil.example", 421)):
            resp = httpx.get(f"{srv.base}/v1/users", headers={**auth, "Host": host}, timeout=10)
            assert resp.status_code == status, (host, resp.text)
    assert "answering Host names: localhost, 127.0.0.1, [::1], memory.internal" in srv.log()


def test_mcp_over_http_checks_host_and_origin(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing")  # keys live in the store: alice first
    mem.create_user("alice")
    key = ApiKeys(mem.store).create("alice").key
    mem.close()
    env = {"MEMLANE_STORE": str(tmp_path / "mcp.db")}
    with served(["mcp", "--transport", "http", "--host", "127.0.0.1", "--port", "0"], env) as srv:
        url = f"{srv.base}/mcp"
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        base = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}

        def post(**headers: str) -> httpx.Response:
            return httpx.post(
                url,
                content=json.dumps(body),
                headers={**base, "Content-Type": "application/json", **headers},
                timeout=10,
            )

        assert post().status_code == 200
        assert post(Origin=f"http://localhost:{srv.port}").status_code == 200
        resp = post(Host="rebound.attacker.example")
        assert resp.status_code == 421 and resp.json()["error"]["code"] == "misdirected_request"
        assert post(Origin="http://rebound.attacker.example").status_code == 403
        assert post(Origin="null").status_code == 403
