"""A worker killed with kill -9 while holding leases: its jobs come back, every effect happens once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import AddRequest, Memory
from memlane.core.store.sqlite import SqliteStore

WORKER = textwrap.dedent(
    """
    import sys, time
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.llm import ChatMessage, ScriptedLLM
    from memlane.core.memory import Memory
    from memlane.core.store.sqlite import SqliteStore

    def slow(messages):
        time.sleep(0.05)  # long enough that jobs are in flight when the kill comes
        first = messages[-1]["content"].splitlines()[0]
        return '{"summary": "S ' + first + '", "facts": ["F ' + first + '"]}'

    mem = Memory(SqliteStore(sys.argv[1]), HashingEmbedder(), llm=ScriptedLLM(slow))
    worker = mem.worker(concurrency=4, lease_s=1.0, poll_s=0.01)
    worker.install_signal_handlers()  # as `memlane worker` does
    worker.run(drain=True)
    """
)


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return '{"summary": "S ' + first + '", "facts": ["F ' + first + '"]}'


@pytest.mark.slow
def test_kill_9_worker_jobs_are_redelivered_and_applied_once(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    store = SqliteStore(db)
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(reply))
    n = 120
    reqs = [
        AddRequest(
            f"user{i % 3}",
            [{"role": "user", "content": f"note {i}"}, {"role": "assistant", "content": "ok"}],
            session_id=f"s{i}",
            perspective="single",
        )
        for i in range(n)
    ]
    mem.add_many(reqs, extract="async")

    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(db)])
    deadline = time.monotonic() + 60
    while True:  # kill while it holds leases, after some jobs are done
        st = mem.queue_status()
        if st.done >= 20 and st.running > 0:
            break
        assert time.monotonic() < deadline and proc.poll() is None, "worker finished or hung before the kill"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    after_kill = mem.queue_status()
    held = after_kill.running
    assert held > 0

    stats = mem.worker(concurrency=2, lease_s=1.0, poll_s=0.05).run(drain=True)
    st = mem.queue_status()
    assert (st.done, st.dead, st.queued, st.running) == (n, 0, 0, 0)
    assert stats.done == n - after_kill.done and stats.lost == 0
    redelivered = store.query("SELECT count(*) FROM jobs WHERE attempts = 2")[0][0]
    assert redelivered >= held
    # Exactly-once effects: one write per block, one summary key and one fact key each.
    assert store.query("SELECT min(extraction_writes), max(extraction_writes) FROM blocks") == [(1, 1)]
    per_block = store.query(
        "SELECT kind, count(*), count(DISTINCT block_pk) FROM search_keys GROUP BY kind ORDER BY kind"
    )
    assert per_block == [("fact", n, n), ("message", n, n), ("summary", n, n)]
    for user in ("user0", "user1", "user2"):
        for b in mem.list(user, limit=1000):
            first = b.message.splitlines()[0]
            assert b.summary == f"S {first}" and b.contexts == (f"F {first}",)
    assert store.integrity_check() == []


@pytest.mark.slow
def test_sigterm_stops_claiming_and_finishes_jobs_in_flight(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = SqliteStore(db)
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(reply))
    n = 200
    reqs = [
        AddRequest("u", [{"role": "user", "content": f"note {i}"}], session_id=f"s{i}", perspective="single")
        for i in range(n)
    ]
    mem.add_many(reqs, extract="async")
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(db)])
    deadline = time.monotonic() + 60
    while mem.queue_status().done < 10:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0  # a clean exit, not a kill
    st = mem.queue_status()
    assert st.running == 0  # nothing left leased: jobs in flight finished before the exit
    assert 10 <= st.done < n and st.queued == n - st.done and st.dead == 0
    assert store.query("SELECT max(attempts) FROM jobs")[0][0] == 1  # nothing was abandoned mid-job
