"""`memlane serve` on PostgreSQL under concurrent adds, searches and a user deleted and made again over and
over, with the server stopped (immediate shutdown, as in a crash) in the middle of the run and started again:
callers get 503 while it is down (never a 500), the service recovers by itself, nothing acknowledged is lost,
and every deletion stays final."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from pg_control import PgServer

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.postgres.store import PostgresStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ADMIN_KEY = "admin-key-for-tests-0123456789"
CLI = "from memlane.interfaces.cli.app import cli, register_all\nregister_all()\ncli()\n"
DOWN_S = 8.0


@dataclass
class Log:
    """Every answer: (when, what, status), the acknowledged blocks of each stable user."""

    answers: list[tuple[float, str, int]] = field(default_factory=list)
    acked: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, what: str, resp: httpx.Response | None) -> int:
        status = 0 if resp is None else resp.status_code
        with self.lock:
            self.answers.append((time.monotonic(), what, status))
        return status


def call(log: Log, http: httpx.Client, what: str, method: str, url: str, **kw: object) -> httpx.Response | None:
    try:
        resp = http.request(method, url, **kw)  # type: ignore[arg-type]
    except httpx.TransportError:
        resp = None
    log.answer(what, resp)
    return resp


def stable_adder(base: str, key: str, user: str, stop: threading.Event, log: Log) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        i = 0
        while not stop.is_set():
            body = {"messages": [{"role": "user", "content": f"{user} note {i} about the beehives"}]}
            resp = call(log, http, "add", "POST", "/v1/memories", json=body)
            if resp is not None and resp.status_code == 201:
                with log.lock:
                    log.acked.setdefault(user, []).extend(resp.json()["block_ids"])
            resp = call(log, http, "search", "POST", "/v1/search", json={"query": "beehives", "k": 5})
            i += 1


def churn(base: str, stop: threading.Event, log: Log) -> None:
    """Make the user, give it a key, add to it, delete it; again and again. Ends with a delete that
    succeeded, so the user must be gone."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60) as admin:
        while not stop.is_set():
            call(log, admin, "create user", "POST", "/v1/users", json={"user": "churn"})
            made = call(log, admin, "create key", "POST", "/v1/users/churn/keys", json={})
            if made is not None and made.status_code == 201:
                headers = {"Authorization": f"Bearer {made.json()['key']}"}
                with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
                    for i in range(3):
                        body = {"messages": [{"role": "user", "content": f"churn note {i}"}]}
                        call(log, http, "churn add", "POST", "/v1/memories", json=body)
            call(log, admin, "delete user", "DELETE", "/v1/users/churn")
        deadline = time.monotonic() + 60
        while (resp := call(log, admin, "delete user", "DELETE", "/v1/users/churn")) is None or resp.is_server_error:
            assert time.monotonic() < deadline, "the final delete never went through"
            time.sleep(0.2)


def wait_for_port(proc: subprocess.Popen[str], lines: list[str]) -> int:
    """Read the server's log until uvicorn says where it listens; keep reading it into ``lines``."""
    found: list[int] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if m := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line):
                found.append(int(m.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(30)
    assert found, "server did not start:\n" + "".join(lines)
    return found[0]


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_serve_rides_out_a_postgres_restart_under_load(
    schema_url: str, pg_url: str, pg_server: PgServer, tmp_path: Path
) -> None:
    env = {**os.environ, "MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": schema_url, "MEMLANE_EMBEDDER": "hashing"}
    args = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0"]
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    log = Log()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        base = f"http://127.0.0.1:{wait_for_port(proc, lines)}"
        keys = {}
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
            for user in ("stable-0", "stable-1"):
                assert admin.post("/v1/users", json={"user": user}).status_code == 201
                keys[user] = admin.post(f"/v1/users/{user}/keys", json={}).json()["key"]
        threads = [threading.Thread(target=stable_adder, args=(base, keys[u], u, stop, log)) for u in keys]
        threads.append(threading.Thread(target=churn, args=(base, stop, log)))
        for t in threads:
            t.start()
        wait_until(lambda: sum(len(v) for v in log.acked.values()) >= 40, 60, "40 acknowledged blocks")
        pg_server.crash()
        down = time.monotonic()
        time.sleep(DOWN_S)
        pg_server.start()
        up = time.monotonic()
        acked_before = sum(len(v) for v in log.acked.values())
        wait_until(lambda: sum(len(v) for v in log.acked.values()) >= acked_before + 40, 90, "the service to recover")
        stop.set()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    statuses = {s for _, _, s in log.answers}
    # No 500, no request left hanging. A 409 answers only the churn's "create user" after its delete was
    # refused while the server was down (the user still exists, and creating it again is a conflict).
    unexpected = {(what, s) for _, what, s in log.answers if s not in {200, 201, 404, 503}}
    assert unexpected <= {("create user", 409)}, f"{sorted(unexpected)}\n" + "".join(lines[-30:])
    # While the server was down, callers were told so (a request waits 5 s for a connection, then 503).
    assert any(s == 503 for w, _, s in log.answers if down <= w <= up), "no 503 while the server was down"
    recovered = min(w for w, what, s in log.answers if w > up and what == "add" and s == 201)
    assert recovered - up < 15, f"the first add went through {recovered - up:.1f} s after the restart"
    print(f"{len(log.answers)} answers, statuses {sorted(statuses)}, first add {recovered - up:.1f} s after restart")
    mem = Memory(PostgresStore(pg_url, schema=schema_url.rsplit("%3D", 1)[1]), HashingEmbedder())
    try:
        for user, ids in log.acked.items():
            assert {b.id for b in mem.list(user, limit=10_000)} == set(ids)  # nothing acknowledged lost
        assert "churn" not in {u.name for u in mem.users()}
        assert set(mem.store.user_row_counts("churn").values()) == {0}
        assert mem.store.integrity_check() == []
    finally:
        mem.close()
