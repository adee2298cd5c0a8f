"""Deleting a user is final, whatever was in flight (on every backend, through two stores on one file or one
database, as two processes would be):

- an add that began before the delete either landed first and went with the user, or fails with
  UserDeletedError and writes nothing; an add that begins after the delete returned starts the user afresh;
- an extraction finishing after the delete writes nothing, not even its LLM call in the call log;
- a synchronous extraction whose jobs another worker ran, or whose jobs went with their user, returns.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import UserDeletedError
from memlane.core.extraction.worker import run_job
from memlane.core.jobs import JobStatus
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore

StoreFactory = Callable[[], Store]
ROUNDS = 25
ADDERS = 3


class SlowEmbedder(HashingEmbedder):
    """Embeds as slowly as MiniLM does a short text (a few ms), so adds spend their time in flight."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        time.sleep(0.004)
        return super().embed(texts)


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def second_store(store: Store) -> Store:
    """Another store on the same file or schema: what a second process opens."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    from memlane.core.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    return PostgresStore(store.url, schema=store.schema, pool_max=ADDERS + 1)


@dataclass
class Attempt:
    """One add: when its read of the deletion epoch began and ended (the instant the add begins, as far as
    the store can tell), and what it returned."""

    read_began: float
    read_ended: float
    ok: bool
    block_ids: tuple[str, ...] = ()


@dataclass
class Round:
    attempts: list[Attempt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, attempt: Attempt) -> None:
        with self.lock:
            self.attempts.append(attempt)

    def count(self, pred: Callable[[Attempt], bool]) -> int:
        with self.lock:
            return sum(pred(a) for a in self.attempts)


class EpochClock:
    """Times the store's read of the deletion epoch in the thread that makes it.

    An add begins, as far as the race is concerned, when it reads the epoch (``Memory.add_many``'s first
    step), not when the test called it: between the two, a thread may wait for a core or open its
    connection, and an add that reads the epoch after the delete committed rightly starts the user afresh.
    Timing the read itself makes the rounds' verdicts independent of how loaded the machine is."""

    def __init__(self, store: Store) -> None:
        self._read = store.deletion_epoch
        self._local = threading.local()
        store.deletion_epoch = self.read  # type: ignore[method-assign]

    def read(self) -> int:
        began = time.monotonic()
        epoch = self._read()
        self._local.span = (began, time.monotonic())
        return epoch

    def last(self) -> tuple[float, float]:
        span: tuple[float, float] = self._local.span
        return span


def race_one_round(
    adding: Memory, clock: EpochClock, deleting: Memory, rnd: int, rng: random.Random
) -> tuple[Round, float, float]:
    """Adders write to alice through one store while the other deletes her; returns when the adders stop."""
    adding.add("alice", chat(f"round {rnd} seed"))
    log = Round()
    stop = threading.Event()

    def adder(k: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                res = adding.add("alice", chat(f"round {rnd} adder {k} note {i}", f"reply {i}"))
            except UserDeletedError:
                log.record(Attempt(*clock.last(), ok=False))
            else:
                log.record(Attempt(*clock.last(), ok=True, block_ids=res.block_ids))
            i += 1

    def wait_for(pred: Callable[[Attempt], bool], n: int) -> None:
        deadline = time.monotonic() + 10.0
        while log.count(pred) < n and time.monotonic() < deadline:
            time.sleep(0.002)

    threads = [threading.Thread(target=adder, args=(k,)) for k in range(ADDERS)]
    for t in threads:
        t.start()
    wait_for(lambda a: True, ADDERS)  # every adder is running (its connection is open)
    time.sleep(rng.uniform(0.0, 0.02))
    started = time.monotonic()
    deleting.delete_user("alice")
    returned = time.monotonic()
    wait_for(lambda a: a.read_began > returned, ADDERS)  # some adds began after the delete returned
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return log, started, returned


def test_adds_in_flight_never_bring_a_deleted_user_back(store_factory: StoreFactory) -> None:
    first = store_factory()
    adding = Memory(first, SlowEmbedder())
    clock = EpochClock(first)
    deleting = Memory(second_store(first), SlowEmbedder())
    rng = random.Random(23)
    refused = survived_before = 0
    try:
        for rnd in range(ROUNDS):
            log, started, returned = race_one_round(adding, clock, deleting, rnd, rng)
            stored = {b.id for b in deleting.list("alice", limit=10_000)}
            # Adds whose read of the epoch overlapped the delete may go either way; these may not.
            before = [a for a in log.attempts if a.read_ended < started]
            after = [a for a in log.attempts if a.read_began > returned]
            assert before and after, "the round raced nothing"
            # Work that began before the delete left nothing, whether it landed first or was refused.
            leaked = [b for a in before for b in a.block_ids if b in stored]
            assert leaked == [], f"round {rnd}: {len(leaked)} blocks of adds begun before the delete survived it"
            # Work that began after it starts the user afresh: never refused, all of it kept.
            assert all(a.ok for a in after), f"round {rnd}: an add begun after the delete was refused"
            assert {b for a in after for b in a.block_ids} <= stored
            refused += sum(not a.ok for a in log.attempts)
            survived_before += sum(a.ok for a in before)
        # Both outcomes of an add caught by a delete happened: refused, and landed first (then deleted).
        assert refused > 0 and survived_before > 0
        deleting.delete_user("alice")
        assert set(first.user_row_counts("alice").values()) == {0}
        assert first.integrity_check() == []
        fresh = adding.add("alice", chat("a new alice"))
        assert [b.id for b in deleting.list("alice")] == list(fresh.block_ids)
    finally:
        deleting.close()


def test_an_add_that_began_before_a_delete_is_refused_even_after_the_name_is_reused(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    mem = Memory(store, HashingEmbedder())
    mem.add("alice", chat("before"))
    began = mem.deletion_epoch()  # an add reads this, then embeds for a while...
    mem.delete_user("alice")
    mem.add("alice", chat("a new alice, after the delete"))  # ...while the name is taken again
    with pytest.raises(UserDeletedError, match="deleted while this write was in flight"):
        mem.add("alice", chat("the slow add"), epoch=began)
    assert {b.message for b in mem.list("alice")} == {"user: a new alice, after the delete"}
    mem.add("bob", chat("another user is not held up"), epoch=began)


def extraction_reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return '{"summary": "S ' + first + '", "facts": ["F ' + first + '"]}'


def test_an_extraction_finishing_after_the_delete_leaves_nothing(store_factory: StoreFactory, tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.db")
    llm = ScriptedLLM(extraction_reply, call_log=log)
    mem = Memory(store_factory(), HashingEmbedder(), llm=llm, call_log=log)
    try:
        res = mem.add("alice", chat("My quokka plays the oboe."), extract="async", perspective="single")
        (job,) = mem.queue.claim("worker-1", 10, 60.0)
        mem.delete_user("alice")  # while the worker's LLM call is in flight
        assert run_job(job, mem.queue, mem.extractor(), mem.embedder) is None
        assert mem.users() == [] and set(mem.store.user_row_counts("alice").values()) == {0}
        assert [r.namespace for r in log.list(100)] == []  # the call it logged went too
        assert res.jobs_enqueued == 1
    finally:
        log.close()


def test_a_synchronous_extraction_returns_when_its_jobs_ran_elsewhere_or_went(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    outcome: dict[str, dict[int, JobStatus]] = {}

    def run(name: str, job_ids: list[int]) -> None:
        outcome[name] = mem.run_jobs(job_ids, retry_pause_s=0.01)

    mem.add("alice", chat("first"), extract="async", perspective="single")
    jobs = mem.queue.claim("another-worker", 10, 60.0)  # a worker took them first and ran them
    for job in jobs:
        run_job(job, mem.queue, mem.extractor(), mem.embedder)
    res = mem.add("bob", chat("second"), extract="async", perspective="single")
    (bobs,) = mem.queue.claim("another-worker", 10, 60.0)
    mem.delete_user("bob")  # bob's job went with him
    threads = [
        threading.Thread(target=run, args=("ran elsewhere", [j.job_id for j in jobs])),
        threading.Thread(target=run, args=("went", [bobs.job_id])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "run_jobs waits forever for jobs it cannot claim"
    assert outcome == {"ran elsewhere": {j.job_id: JobStatus.DONE for j in jobs}, "went": {}}
    assert res.jobs_enqueued == 1


def test_a_late_completion_never_writes_into_a_reused_job_of_another_user(tmp_path: Path) -> None:
    """SQLite hands out a deleted user's newest row ids again: a job and a block of bob's may carry the ids
    of a job of alice's that a worker still holds."""
    mem = Memory(SqliteStore(tmp_path / "reuse.db"), HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    mem.add("alice", chat("Alice's secret: the vault code is 4711."), extract="async", perspective="single")
    (old,) = mem.queue.claim("worker-1", 10, 60.0)
    mem.delete_user("alice")
    mem.add("bob", chat("Bob likes tea."), extract="async", perspective="single")
    (new,) = mem.queue.claim("worker-1", 10, 60.0)  # the same worker picks up bob's job
    assert (new.job_id, new.block_ref) == (old.job_id, old.block_ref), "ids were not reused: nothing tested"
    assert run_job(old, mem.queue, mem.extractor(), mem.embedder) is None  # alice's, finishing late
    (bob,) = mem.list("bob")
    assert bob.summary is None and "4711" not in str(bob.contexts)
    assert run_job(new, mem.queue, mem.extractor(), mem.embedder) is JobStatus.DONE
    assert mem.list("bob")[0].summary == "S user: Bob likes tea."


def test_another_process_never_serves_a_deleted_users_cached_index_for_a_new_user(tmp_path: Path) -> None:
    """A user id freed by a delete is reused by SQLite; a process that cached the deleted user's vectors
    under (id, version) must not take them for the new user's when that one reaches the same version."""
    searching = Memory(SqliteStore(tmp_path / "cache.db"), HashingEmbedder())
    writing = Memory(SqliteStore(tmp_path / "cache.db"), HashingEmbedder())
    for i in range(3):
        writing.add("alice", chat(f"alice talks about violins {i}"))
    assert searching.search("alice", "violins", k=3)  # caches alice's index in this process
    writing.delete_user("alice")
    for i in range(3):
        writing.add("bob", chat(f"bob talks about gardening {i}"))
    q = HashingEmbedder().embed(["gardening"])[0]
    assert searching.store.vector_candidates("bob", q, 10) == writing.store.vector_candidates("bob", q, 10)
