"""Several processes on one SQLite file: `memlane serve` (with an extraction worker of its own, and an HTTP
client adding, with extraction queued or run before the answer, and searching), two loops of
`memlane add --extract async` processes and a `memlane worker`, all at once. No caller ever sees "database
is locked", every acknowledged add is stored, and the queue ends with every job done or dead.

Bounded: MEMLANE_MULTIPROCESS_SECONDS (default 12) of load, then the worker drains the queue. The longer run:
    MEMLANE_MULTIPROCESS_SECONDS=60 .venv/bin/pytest -q tests/http/test_sqlite_multiprocess.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from http_support import ADMIN_KEY, CLI, chat, wait_for_port

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("MEMLANE_MULTIPROCESS_SECONDS", "12"))
LOCKED = "locked"


@dataclass
class Tally:
    """What every caller was told: acknowledged block ids by user, and every failure's text."""

    acked: dict[str, list[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, user: str, ids: list[str]) -> None:
        with self.lock:
            self.calls += 1
            self.acked.setdefault(user, []).extend(ids)

    def fail(self, what: str) -> None:
        with self.lock:
            self.calls += 1
            self.failures.append(what)


def memlane(*args: str, env: dict[str, str], **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CLI, *args], env=env, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def add_loop(user: str, env: dict[str, str], messages: Path, stop: threading.Event, tally: Tally) -> None:
    """`memlane add` processes one after the other, each a new process on the store."""
    i = 0
    while not stop.is_set():
        proc = memlane(
            "add", user, "--session", f"s{i}", "--file", str(messages), "--extract", "async", "--json",
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            tally.ack(user, json.loads(out)["block_ids"])
        else:
            tally.fail(f"memlane add exit {proc.returncode}: {err.strip()}")
        i += 1


def http_load(base: str, key: str, user: str, stop: threading.Event, tally: Tally) -> None:
    """One client adding (every other add with its extraction run before the answer, which the workers in
    the other processes may claim first) and searching through the service."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        i = 0
        while not stop.is_set():
            body = {"messages": chat(f"http note {i} about bees"), "extract": ("async", "sync")[i % 2]}
            try:
                resp = http.post("/v1/memories", json=body)
            except httpx.TimeoutException:
                tally.fail(f"POST /v1/memories with extract {body['extract']} timed out")
                continue
            if resp.status_code == 201:
                tally.ack(user, resp.json()["block_ids"])
            else:
                tally.fail(f"POST /v1/memories {resp.status_code}: {resp.text}")
            found = http.post("/v1/search", json={"query": "bees", "k": 5})
            if found.status_code != 200:
                tally.fail(f"POST /v1/search {found.status_code}: {found.text}")
            i += 1


def queue_status(env: dict[str, str]) -> dict[str, int]:
    proc = memlane("queue", "status", "--json", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out))


def test_serve_add_loops_and_a_worker_share_one_sqlite_file(tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    env = {
        **os.environ,
        "MEMLANE_STORE": str(store),
        "MEMLANE_EMBEDDER": "hashing",
        "MEMLANE_LLM": "scripted",
        "MEMLANE_ADMIN_KEY": ADMIN_KEY,
    }
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps(chat("I keep three beehives in the garden.", "How much honey?")))
    assert memlane("init", env=env, stdout=subprocess.DEVNULL).wait(timeout=60) == 0
    logs: dict[str, list[str]] = {"serve": [], "worker": []}
    serve = memlane(
        "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "1", "--no-access-log",
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    worker = memlane(
        "worker", "--concurrency", "2", "--poll", "0.01", env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE
    )
    threading.Thread(target=lambda: logs["worker"].extend(worker.stderr or []), daemon=True).start()
    tally = Tally()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        base = f"http://127.0.0.1:{wait_for_port(serve, logs['serve'])}"
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60) as admin:
            assert admin.post("/v1/users", json={"user": "http-user"}).status_code == 201
            key = admin.post("/v1/users/http-user/keys", json={}).json()["key"]
        threads = [
            threading.Thread(target=add_loop, args=(f"cli-{k}", env, messages, stop, tally)) for k in range(2)
        ] + [threading.Thread(target=http_load, args=(base, key, "http-user", stop, tally))]
        for t in threads:
            t.start()
        time.sleep(SECONDS)
        stop.set()
        for t in threads:
            t.join(timeout=180)
        # Before the shutdown: an add stuck in the service would hold it up (it used to wait forever for
        # extraction jobs that a worker in another process had already run).
        assert tally.failures == [], tally.failures[:5]
        # The worker (and the service's own) finish what is queued.
        deadline = time.monotonic() + 120
        while (st := queue_status(env))["queued"] + st["running"] > 0:
            assert time.monotonic() < deadline, f"the queue did not drain: {st}"
            time.sleep(0.5)
        for proc in (worker, serve):
            proc.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, "".join(logs["worker"])
        assert serve.wait(timeout=60) == 0, "".join(logs["serve"])
    finally:
        stop.set()
        for proc in (worker, serve):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    output = "".join(logs["serve"] + logs["worker"])
    assert LOCKED not in output and not [f for f in tally.failures if LOCKED in f], output
    assert tally.failures == []
    assert {"cli-0", "cli-1", "http-user"} <= set(tally.acked) and tally.calls >= 20
    mem = Memory(SqliteStore(store), HashingEmbedder())
    try:
        for user, ids in tally.acked.items():  # nothing acknowledged is lost
            assert {b.id for b in mem.list(user, limit=10_000)} == set(ids)
        st = mem.queue_status()
        assert (st.queued, st.running, st.dead) == (0, 0, 0)
        assert st.done == sum(len(ids) for ids in tally.acked.values())  # every block's job ran, once
        assert mem.store.integrity_check() == []
        acked = {user: len(ids) for user, ids in tally.acked.items()}
        print(f"{SECONDS:.0f} s: {tally.calls} calls, blocks acknowledged {acked}, jobs done {st.done}")  # -s shows it
    finally:
        mem.close()
