"""The LLM's health over HTTP (`GET /v1/llm`, and the `llm` line of /healthz) against a real in-process
OpenAI-compatible server: up, down, rate-limited, too slow; the probe is one GET of /models, never a
completion; a user's key never sees where the LLM is; a down LLM never makes /healthz fail."""

from __future__ import annotations

import importlib
import random
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_support import ADMIN_KEY, TEST_HOSTS, Service, chat
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog, LLMSettings, OpenAIChatClient, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

# The fake OpenAI server lives with the LLM tests; appended, so its folder never shadows this one's modules.
LLM_TESTS = Path(__file__).resolve().parents[1] / "core" / "llm"
if str(LLM_TESTS) not in sys.path:
    sys.path.append(str(LLM_TESTS))
fakeserver = importlib.import_module("fakeserver")
SECRET = "sk-probe-5ecret-key"


def service(tmp_path: Path, base_url: str | None, *, scripted: bool = False) -> Service:
    log = CallLog(tmp_path / "calls.db")
    llm: Any = None
    if scripted:
        llm = ScriptedLLM(model="scripted-model")
    elif base_url is not None:
        settings = LLMSettings(model=fakeserver.FAKE_MODEL, api_key=SECRET, base_url=base_url, max_retries=0)
        llm = OpenAIChatClient(settings, call_log=log, sleep=lambda _s: None, rng=random.Random(1))
    memory = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder(), llm=llm, call_log=log)
    app = create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS))
    return Service(app, memory, log, SyncASGITransport(app))


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[Service, Any]]:
    with fakeserver.FakeChatServer() as server:
        svc = service(tmp_path, server.url)
        yield svc, server
        svc.close()


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_llm_that_answers(up: tuple[Service, Any]) -> None:
    svc, server = up
    plain = svc.admin.get("/v1/llm").json()
    assert plain["configured"] and plain["provider"] == "openai" and plain["model"] == fakeserver.FAKE_MODEL
    assert plain["probe"] is None and plain["outage"] is None
    assert plain["endpoint"] == server.url  # the admin is told where
    assert server.count == 0  # no probe unless asked

    body = svc.admin.get("/v1/llm", params={"probe": "true"}).json()
    probe = body["probe"]
    assert probe["ok"] and probe["error_kind"] is None and probe["status"] == 200
    assert probe["model_listed"] is True and probe["latency_ms"] >= 0
    # One GET of /models with the key, never a completion.
    assert [(r.path, r.body) for r in server.requests] == [("/v1/models", {})]
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"

    server.models = ["another-model"]
    assert svc.admin.get("/v1/llm", params={"probe": "true"}).json()["probe"]["model_listed"] is False
    health = svc.client().get("/healthz").json()
    assert health["status"] == "ok" and health["llm"]["ok"]
    assert health["llm"]["detail"] == {"configured": True, "model": fakeserver.FAKE_MODEL, "waiting_jobs": 0}
    assert SECRET not in str(body) and SECRET not in str(health)


def test_rate_limited_and_too_slow(up: tuple[Service, Any]) -> None:
    svc, server = up
    server.queue(fakeserver.Reply(status=429, headers={"Retry-After": "30"}))
    probe = svc.admin.get("/v1/llm", params={"probe": "true"}).json()["probe"]
    assert not probe["ok"] and probe["error_kind"] == "rate_limited" and probe["status"] == 429
    server.queue(fakeserver.Reply(status=401))
    assert svc.admin.get("/v1/llm", params={"probe": "true"}).json()["probe"]["error_kind"] == "refused"
    server.queue(fakeserver.Reply(status=500))
    assert svc.admin.get("/v1/llm", params={"probe": "true"}).json()["probe"]["error_kind"] == "http_error"
    server.queue(fakeserver.Reply(body="not json"))
    assert svc.admin.get("/v1/llm", params={"probe": "true"}).json()["probe"]["error_kind"] == "bad_reply"

    server.queue(fakeserver.Reply(delay_s=2.0, body="{}"))
    slow = svc.admin.get("/v1/llm", params={"probe": "true", "timeout_s": "0.2"}).json()["probe"]
    assert not slow["ok"] and slow["error_kind"] == "timeout" and slow["status"] is None
    assert 150 <= slow["latency_ms"] < 1900, slow  # the probe's own timeout, not the client's 60 s
    assert all(r.path == "/v1/models" for r in server.requests)  # never a completion


def test_a_down_llm_is_said_and_never_fails_healthz(tmp_path: Path) -> None:
    port = dead_port()
    svc = service(tmp_path, f"http://127.0.0.1:{port}/v1")
    try:
        probe = svc.admin.get("/v1/llm", params={"probe": "true"}).json()["probe"]
        assert not probe["ok"] and probe["error_kind"] == "unreachable" and f"127.0.0.1:{port}" in probe["detail"]

        key = svc.new_user("alice")
        alice = svc.client(key)
        added = alice.post("/v1/memories", json={"messages": chat("I keep bees."), "extract": "async"})
        assert added.status_code == 201
        assert svc.memory.worker(concurrency=1).run(drain=True).llm_unreachable

        admin_view = svc.admin.get("/v1/llm").json()
        assert admin_view["outage"]["jobs"] == 1 and f"127.0.0.1:{port}" in admin_view["outage"]["last_error"]
        health = svc.client().get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert health.json()["llm"] == {
            "ok": False,
            "detail": {"configured": True, "model": fakeserver.FAKE_MODEL, "waiting_jobs": 1},
        }

        # A user's key: the outage, without any address; no endpoint; no probe.
        mine = alice.get("/v1/llm")
        assert mine.status_code == 200
        body = mine.json()
        assert body["endpoint"] is None and body["outage"]["jobs"] == 1 and body["probe"] is None
        assert "<address>" in body["outage"]["last_error"]
        assert str(port) not in mine.text and "http://" not in mine.text and SECRET not in mine.text
        refused = alice.get("/v1/llm", params={"probe": "true"})
        assert refused.status_code == 403 and "admin" in refused.json()["error"]["message"]
        assert svc.client().get("/v1/llm").status_code == 401
        assert svc.admin.get("/v1/llm", params={"probe": "true", "timeout_s": "0"}).status_code == 422
    finally:
        svc.close()


def test_without_an_llm_and_with_the_scripted_one(tmp_path: Path) -> None:
    none = service(tmp_path / "a", None)
    try:
        body = none.admin.get("/v1/llm", params={"probe": "true"}).json()
        assert body == {
            "configured": False,
            "provider": None,
            "model": None,
            "endpoint": None,
            "outage": None,
            "probe": None,
        }
        assert none.client().get("/healthz").json()["llm"]["detail"]["configured"] is False
    finally:
        none.close()
    scripted = service(tmp_path / "b", None, scripted=True)
    try:
        body = scripted.admin.get("/v1/llm", params={"probe": "true"}).json()
        assert body["provider"] == "scripted" and body["model"] == "scripted-model" and body["endpoint"] is None
        assert body["probe"]["ok"] and body["probe"]["error_kind"] is None
    finally:
        scripted.close()
