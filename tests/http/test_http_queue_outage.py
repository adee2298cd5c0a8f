"""The queue over HTTP through an LLM outage: `GET /v1/queue` shows it (to a user's key without the LLM's
address, nor any host or port), `POST /v1/queue/retry` runs failed jobs again; a sweep at either end of the
accepted times is answered; a block deleted over HTTP takes its LLM calls along."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_support import ADMIN_KEY, TEST_HOSTS, Service, chat
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog, LLMSettings, OpenAIChatClient
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def down(tmp_path: Path) -> Iterator[tuple[Service, int]]:
    """A service whose LLM server does not answer (connection refused on a loopback port)."""
    port = dead_port()
    log = CallLog(tmp_path / "down.calls.db")
    settings = LLMSettings(model="m", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    llm = OpenAIChatClient(settings, call_log=log, sleep=lambda _s: None, rng=random.Random(1))
    memory = Memory(SqliteStore(tmp_path / "down.db"), HashingEmbedder(), llm=llm, call_log=log)
    app = create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS))
    svc = Service(app, memory, log, SyncASGITransport(app))
    yield svc, port
    svc.close()


def texts(value: Any) -> str:
    return str(value)


def test_the_outage_shows_in_the_queue_and_never_an_address_to_a_user(down: tuple[Service, int]) -> None:
    svc, port = down
    key = svc.new_user("alice")
    alice = svc.client(key)
    assert alice.post("/v1/memories", json={"messages": chat("I keep bees."), "extract": "async"}).status_code == 201
    stats = svc.memory.worker(concurrency=2).run(drain=True)
    assert stats.llm_unreachable and stats.dead == 0

    admin_view = svc.admin.get("/v1/queue").json()
    assert admin_view["queued"] == 2 and admin_view["dead"] == 0
    outage = admin_view["llm_outage"]
    assert outage["jobs"] == 2 and outage["waiting_s"] >= 0 and outage["next_try_in_s"] > 0
    assert f"127.0.0.1:{port}" in outage["last_error"]  # the operator is told where

    # Everything a user's key is answered: no URL, address or port of the service's machines.
    bodies = [
        alice.get("/v1/queue").json(),
        alice.post("/v1/memories", json={"messages": chat("Sync now."), "extract": "sync"}).json(),
        alice.get("/v1/memories").json(),
        alice.post("/v1/search", json={"query": "bees"}).json(),
        svc.client().get("/healthz").json(),
    ]
    user_view = bodies[0]
    assert user_view["llm_outage"]["jobs"] >= 2 and "<address>" in user_view["llm_outage"]["last_error"]
    assert user_view["last_errors"] and all("<address>" in e["error"] for e in user_view["last_errors"])
    for body in bodies:
        assert str(port) not in texts(body) and "http://" not in texts(body), body


def test_retry_runs_failed_jobs_again_and_says_how_many(down: tuple[Service, int]) -> None:
    svc, _ = down
    alice = svc.client(svc.new_user("alice"))
    alice.post("/v1/memories", json={"messages": chat("I keep bees."), "extract": "async"})
    svc.memory.worker(concurrency=2).run(drain=True)
    resp = svc.admin.post("/v1/queue/retry", json={"user": "alice"})
    assert resp.status_code == 200 and resp.json() == {"dead": 0, "waiting": 2}
    assert svc.admin.post("/v1/queue/retry").json() == {"dead": 0, "waiting": 0}  # idempotent
    assert svc.admin.post("/v1/queue/retry", json={"dead_only": True}).json() == {"dead": 0, "waiting": 0}
    assert alice.post("/v1/queue/retry").status_code == 403
    assert svc.admin.post("/v1/queue/retry", json={"user": "nobody"}).status_code == 404
    bad = svc.admin.post("/v1/queue/retry", json={"since": "whenever"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "since"
    assert svc.admin.post("/v1/queue/retry", json={"dead_only": "yes"}).status_code == 422


def test_dead_jobs_come_back_over_http(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    added = alice.post("/v1/memories", json={"messages": chat("Bees."), "extract": "async"}).json()
    for _ in range(service.memory.max_attempts):  # every attempt of both jobs fails
        service.memory.requeue(dead_only=False)
        for job in service.memory.queue.claim("w", 10, 60.0):
            service.memory.queue.fail(job, "LLMResponseError: no", None, 60.0)
    assert service.memory.queue_status().dead == 2
    body = {"block_ids": added["block_ids"][:1], "dead_only": True}
    assert service.admin.post("/v1/queue/retry", json=body).json() == {"dead": 1, "waiting": 0}
    statuses = [b["extraction_status"] for b in alice.get("/v1/memories").json()]
    assert sorted(statuses) == ["failed", "queued"]


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", -62135596800, 253402300799])
def test_a_sweep_at_either_end_of_time_is_answered(service: Service, at: str | int) -> None:
    service.client(service.new_user("alice")).post("/v1/memories", json={"messages": chat("Bees.")})
    assert service.admin.put("/v1/retention/default", json={"max_age_days": 30}).status_code == 200
    for dry_run in (True, False):
        resp = service.admin.post("/v1/retention/apply", json={"at": at, "dry_run": dry_run})
        assert resp.status_code == 200, resp.text
    expected = 2 if str(at).startswith(("9999", "2534")) else 0
    assert resp.json()["expired"] == expected


def test_a_block_deleted_over_http_takes_its_llm_calls(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    ids = alice.post("/v1/memories", json={"messages": chat("Bees."), "extract": "sync"}).json()["block_ids"]
    assert {r.block_id for r in service.call_log.list(10)} == set(ids)
    assert alice.delete(f"/v1/memories/{ids[0]}").status_code == 204
    assert {r.block_id for r in service.call_log.list(10)} == {ids[1]}
    assert service.admin.get("/v1/queue").json()["llm_outage"] is None
