"""Several processes against one PostgreSQL: worker processes with one killed by kill -9 (exactly-once
effects), and API processes writing through an immediate shutdown of the server (no acknowledged write
lost). Each test is bounded: it kills what it started and fails past its deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from queue import Empty, Queue

import pytest
from pg_control import PgServer

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import AddRequest, Memory
from memlane.core.store.postgres.store import PostgresStore

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

NewStore = Callable[..., PostgresStore]

WORKER = textwrap.dedent(
    """
    import sys, time
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.extraction.worker import Worker
    from memlane.core.llm import ScriptedLLM
    from memlane.core.memory import Memory
    from memlane.core.store.postgres.store import PostgresStore

    url, schema, owner, delay = sys.argv[1:5]

    def slow(messages):
        time.sleep(float(delay))  # long enough that jobs are in flight when the kill comes
        first = messages[-1]["content"].splitlines()[0]
        return '{"summary": "S ' + first + '", "facts": ["F ' + first + '"]}'

    mem = Memory(PostgresStore(url, schema=schema, pool_max=8), HashingEmbedder(), llm=ScriptedLLM(slow))
    Worker(mem.queue, mem.extractor(), mem.embedder, concurrency=4, lease_s=1.0, poll_s=0.02, owner=owner).run(
        drain=True
    )
    """
)

WRITER = textwrap.dedent(
    """
    import sys, time
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.errors import StoreError
    from memlane.core.memory import Memory
    from memlane.core.store.postgres.store import PostgresStore

    url, schema, name = sys.argv[1:4]
    mem = Memory(PostgresStore(url, schema=schema, timeout_s=5), HashingEmbedder())
    i = 0
    while True:
        msgs = [{"role": "user", "content": f"{name} message {i} " + "word " * (i % 20)},
                {"role": "assistant", "content": f"reply {i}"}]
        try:
            res = mem.add(f"user{i % 3}", msgs, session_id=f"{name}-s{i}")
        except StoreError:
            print("ERR", flush=True)  # not acknowledged: it may or may not have committed
            time.sleep(0.1)
        else:
            # Printed only after add returned: these are the acknowledged writes.
            print(f"ACK {name} {res.user} " + " ".join(res.block_ids), flush=True)
        i += 1
    """
)


def reply(messages: list[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return '{"summary": "S ' + first + '", "facts": ["F ' + first + '"]}'


def wait_for(condition: Callable[[], bool], deadline: float, what: str) -> None:
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_three_workers_one_killed_every_effect_happens_once(server_url: str, new_server_store: NewStore) -> None:
    """On one server, 150 jobs of 3 users; on Citus, where a claim leases one user's jobs at a time, 2,000
    jobs spread over 200 users."""
    store = new_server_store()
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(reply))
    n, users = (2000, 200) if store.citus else (150, 3)
    notes = [[{"role": "user", "content": f"note {i}"}] for i in range(n)]
    reqs = [AddRequest(f"user{i % users}", m, session_id=f"s{i}", perspective="single") for i, m in enumerate(notes)]
    mem.add_many(reqs, extract="async")
    # The victim's calls take longer, so that it holds leases whenever it is killed (a claim through a Citus
    # coordinator can take longer than a fast call: a victim between batches would hold none).
    delays = {"w0": "0.5", "w1": "0.05", "w2": "0.05"}
    procs = {
        owner: subprocess.Popen([sys.executable, "-c", WORKER, server_url, store.schema or "", owner, delay])
        for owner, delay in delays.items()
    }
    try:
        deadline = time.monotonic() + 60

        def victim_holds_leases() -> bool:
            held = store.query("SELECT count(*) FROM jobs WHERE status = 'running' AND lease_owner = 'w0'")[0][0]
            return mem.queue_status().done >= 20 and held > 0

        wait_for(victim_holds_leases, deadline, "w0 to hold leases after 20 jobs")
        os.kill(procs["w0"].pid, signal.SIGKILL)
        procs["w0"].wait()
        held = store.query("SELECT count(*) FROM jobs WHERE status = 'running' AND lease_owner = 'w0'")[0][0]
        for owner in ("w1", "w2"):
            assert procs[owner].wait(timeout=300) == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    st = mem.queue_status()
    assert (st.done, st.dead, st.queued, st.running) == (n, 0, 0, 0)
    assert held > 0 and store.query("SELECT count(*) FROM jobs WHERE attempts = 2")[0][0] >= held
    # Exactly-once effects: one write per block, one summary key and one fact key each.
    assert store.query("SELECT min(extraction_writes), max(extraction_writes) FROM blocks") == [(1, 1)]
    per_kind = store.query("SELECT kind, count(*), count(DISTINCT block_pk) FROM search_keys GROUP BY kind ORDER BY 1")
    assert per_kind == [("fact", n, n), ("message", n, n), ("summary", n, n)]
    for user in (f"user{i}" for i in range(users)):
        for b in mem.list(user, limit=1000):
            first = b.message.splitlines()[0]
            assert b.summary == f"S {first}" and b.contexts == (f"F {first}",)
    assert store.integrity_check() == []


def _reader(proc: subprocess.Popen[str], out: Queue[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        out.put(line.strip())


def test_immediate_shutdown_during_ingest_loses_no_acknowledged_write(
    pg_url: str, pg_server: PgServer, new_store: NewStore
) -> None:
    """Two API processes add to overlapping users; the server stops with ``-m immediate`` mid-ingest and
    restarts; every acknowledged add is there afterwards, the writers carry on by themselves."""
    store = new_store()
    lines: Queue[str] = Queue()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, pg_url, store.schema or "", f"api{k}"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for k in range(2)
    ]
    readers = [threading.Thread(target=_reader, args=(p, lines), daemon=True) for p in procs]
    for r in readers:
        r.start()
    acked: list[tuple[str, list[str]]] = []
    per_writer = {"api0": 0, "api1": 0}
    errors = 0

    def drain_until(target: int, seconds: float) -> None:
        """Until ``target`` more adds are acknowledged, at least a tenth of them by each writer."""
        nonlocal errors
        deadline = time.monotonic() + seconds
        start = dict(per_writer)
        while sum(per_writer.values()) - sum(start.values()) < target or any(
            per_writer[w] - start[w] < target // 10 for w in per_writer
        ):
            assert time.monotonic() < deadline, f"acknowledged adds by writer: {per_writer}"
            assert all(p.poll() is None for p in procs), "a writer died"
            try:
                take(lines.get(timeout=0.5))
            except Empty:
                continue

    def take(line: str) -> None:
        nonlocal errors
        if line == "ERR":
            errors += 1
        elif line.startswith("ACK "):
            writer, user, *ids = line[4:].split()
            per_writer[writer] += 1
            acked.append((user, ids))

    try:
        drain_until(60, 60)  # both writers are up and writing
        pg_server.crash()
        # Down for longer than the writers' pool timeout (5 s): a writer caught between transactions would
        # otherwise just wait for the restart, and no add would fail. Nothing acknowledged may be lost.
        time.sleep(6.0)
        pg_server.start()
        drain_until(60, 90)  # both carry on after the restart
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for r in readers:
            r.join(timeout=10)
    while not lines.empty():  # what the writers printed before the kill was acknowledged too
        take(lines.get())
    assert errors > 0, "the shutdown happened between adds: nothing was tested"
    mem = Memory(new_store(schema=store.schema), HashingEmbedder())
    for user, ids in acked:
        for bid in ids:
            assert mem.get(user, bid).id == bid
    stored = sum(u.blocks for u in mem.users())
    acked_blocks = sum(len(ids) for _, ids in acked)
    # An add whose commit reached the server but whose answer did not may be stored unacknowledged:
    # at most one per error and one per writer killed at the end (two blocks each, dual mode).
    assert acked_blocks <= stored <= acked_blocks + 2 * (errors + len(procs))
    assert mem.store.integrity_check() == []
