"""Failed extraction jobs run again: ``JobQueue.requeue`` / ``Memory.requeue`` on every backend, by user, by
time and by block ids, idempotent, never touching running or done jobs; an outage's deferral keeps a job's
attempts."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.jobs import JobStatus, Requeued
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import ExtractionStatus
from memlane.core.store.protocol import Store
from memlane.core.timefmt import now_utc, to_epoch

StoreFactory = Callable[[], Store]


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [first]})


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]


def dead_memory(store_factory: StoreFactory, max_attempts: int = 2) -> tuple[Memory, dict[str, list[str]]]:
    """A memory whose jobs of alice and bob all died of unusable replies, with an LLM that now works."""
    mem = Memory(store_factory(), HashingEmbedder(), max_attempts=max_attempts)
    blocks = {
        user: [
            b
            for w in ("one", "two")
            for b in mem.add(user, chat(f"{user} {w}"), extract="async", perspective="single").block_ids
        ]
        for user in ("alice", "bob")
    }
    for _ in range(max_attempts):
        mem.requeue(dead_only=False)  # each failure waits out a backoff: run the next try now
        for job in mem.queue.claim("w", 10, 60.0):
            mem.queue.fail(job, "LLMResponseError: not json", "not json at all", 3600.0)
    assert mem.queue_status().dead == 4
    mem.llm = ScriptedLLM(reply)
    return mem, blocks


def statuses(mem: Memory, user: str) -> list[ExtractionStatus]:
    return [b.extraction_status for b in mem.list(user)]


def test_dead_jobs_run_again_with_their_attempts_reset(store_factory: StoreFactory) -> None:
    mem, blocks = dead_memory(store_factory)
    try:
        assert statuses(mem, "alice") == [ExtractionStatus.FAILED] * 2
        assert mem.requeue(user="alice") == Requeued(dead=2, waiting=0)
        assert mem.requeue(user="alice") == Requeued()  # idempotent
        assert statuses(mem, "alice") == [ExtractionStatus.QUEUED] * 2
        assert statuses(mem, "bob") == [ExtractionStatus.FAILED] * 2  # only alice's
        st = mem.queue_status()
        assert (st.queued, st.dead) == (2, 2)
        jobs = mem.queue.claim("w", 10, 60.0)
        assert sorted(j.block.id for j in jobs) == sorted(blocks["alice"]) and {j.attempts for j in jobs} == {1}
        for job in jobs:
            mem.queue.fail(job, "again", None, 0.0)
        # The block ids pick single blocks, whichever user they are (and another user's filter picks none).
        assert mem.requeue(user="alice", block_ids=blocks["bob"][:1]) == Requeued()
        assert mem.requeue(block_ids=blocks["bob"][:1]) == Requeued(dead=1)
        assert [s is ExtractionStatus.QUEUED for s in statuses(mem, "bob")].count(True) == 1
    finally:
        mem.close()


def test_since_and_dead_only_pick_what_failed_recently(store_factory: StoreFactory) -> None:
    mem, _ = dead_memory(store_factory)
    try:
        later = time.time() + 3600
        assert mem.requeue(since=later) == Requeued()
        assert mem.requeue(since=now_utc().replace(year=2000)) == Requeued(dead=4)
        # Now queued and ready: a failure puts one back to wait out its backoff.
        job = mem.queue.claim("w", 1, 60.0)[0]
        assert mem.queue.fail(job, "bad reply", None, 3600.0) is JobStatus.QUEUED
        assert mem.requeue() == Requeued()  # dead_only: a waiting job is not dead
        assert mem.requeue(dead_only=False) == Requeued(waiting=1)
        assert mem.requeue(dead_only=False) == Requeued()
        assert mem.queue.claim("w", 10, 60.0)  # ready now
    finally:
        mem.close()


def test_running_and_done_jobs_are_never_touched(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(reply))
    try:
        done = mem.add("alice", chat("done one"), extract="sync", perspective="single").block_ids
        mem.add("alice", chat("running one"), extract="async", perspective="single")
        running = mem.queue.claim("w", 1, 60.0)
        assert len(running) == 1
        assert mem.requeue(dead_only=False) == Requeued()
        assert mem.queue.statuses([running[0].job_id]) == {running[0].job_id: JobStatus.RUNNING}
        assert mem.get("alice", done[0]).extraction_status is ExtractionStatus.DONE
    finally:
        mem.close()


def test_an_outage_defers_a_job_and_keeps_its_attempts(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(reply), max_attempts=2)
    try:
        mem.add("alice", chat("waiting one"), extract="async", perspective="single")
        before = to_epoch(now_utc())
        for n in range(1, 6):  # more tries than the job has attempts
            job = mem.queue.claim("w", 1, 60.0)[0]
            assert job.attempts == 1 and job.llm_failures == n - 1
            assert mem.queue.defer(job, "LLMTransportError: connection refused", 0.0) is JobStatus.QUEUED
        st = mem.queue_status()
        assert (st.queued, st.dead) == (1, 0)
        assert st.llm_outage is not None and st.llm_outage.jobs == 1 and st.llm_outage.since >= before - 1
        assert "connection refused" in st.llm_outage.last_error
        job = mem.queue.claim("w", 1, 60.0)[0]
        assert mem.queue.defer(job, "later", 3600.0) is JobStatus.QUEUED
        outage = mem.queue_status().llm_outage
        assert outage is not None and 3000 < outage.next_try_in_s <= 3600
        assert mem.requeue(dead_only=False) == Requeued(waiting=1)
        job = mem.queue.claim("w", 1, 60.0)[0]
        assert mem.queue.fail(job, "bad reply", None, 0.0) is JobStatus.QUEUED  # a reply: the outage is over
        assert mem.queue_status().llm_outage is None
        job = mem.queue.claim("w", 1, 60.0)[0]
        assert job.attempts == 2 and job.llm_failures == 0  # only the bad reply used an attempt
        # A worker whose lease was lost writes nothing.
        assert mem.queue.defer(dataclasses.replace(job, owner="another worker"), "late", 0.0) is None
        assert mem.queue.defer(job, "unreachable", 0.0) is JobStatus.QUEUED
    finally:
        mem.close()


def test_requeue_checks_its_arguments(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder())
    try:
        with pytest.raises(NotFoundError):
            mem.requeue(user="nobody")
        with pytest.raises(ValidationError, match="since"):
            mem.requeue(since="yesterday-ish")
        with pytest.raises(ValidationError, match="block_ids"):
            mem.requeue(block_ids="0123abc")
        assert mem.requeue(block_ids=[]) == Requeued()
    finally:
        mem.close()
