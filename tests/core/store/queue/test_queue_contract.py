"""The ``Queue`` protocol (memlane.core.store.queue) on every backend, driven through that protocol alone: what
``requeue_block`` promises that the block-status test beside this one (through Memory) does not already check."""

from __future__ import annotations

import time

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import MemoryBlock
from memlane.core.store.expiry import Expiry, TtlChange
from memlane.core.store.protocol import Store
from memlane.core.store.queue import Queue
from memlane.core.timefmt import from_epoch


def failed_block(store: Store) -> MemoryBlock:
    """A block whose extraction failed (its one attempt answered with what is not JSON)."""
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM("not json"), max_attempts=1)
    res = mem.add_facts("alice", ["Alice collects stamps"], extract="sync")
    assert res.jobs_failed == 1
    return mem.get("alice", res.block_ids[0])


def test_requeue_block_makes_one_new_job_and_marks_the_block_queued(queue: Queue, store: Store) -> None:
    block = failed_block(store)
    now = time.time()
    again = queue.requeue_block("alice", block.id, max_attempts=3, now=now)
    assert again.id == block.id and again.status == "processing"
    assert again.fail_count == block.fail_count  # the failures so far are kept
    jobs = queue.job_queue().claim("w", 10, 60.0)
    assert [job.block.id for job in jobs] == [block.id]  # the dead job went: one job, the new one
    assert (jobs[0].attempts, jobs[0].max_attempts) == (1, 3)
    assert queue.job_queue().status().dead == 0


def test_requeue_block_stamps_the_callers_clock(queue: Queue, store: Store) -> None:
    """``last_queued_at`` is ``now``, the caller's clock (what TTLs and every other stamp of the store are decided
    against), in every dialect."""
    block = failed_block(store)
    now = time.time() - 30  # a caller's clock behind the server's
    again = queue.requeue_block("alice", block.id, max_attempts=3, now=now)
    assert again.last_queued_at == from_epoch(now)


def test_requeue_block_of_an_unknown_foreign_or_expired_block_is_not_found(
    queue: Queue, expiry: Expiry, store: Store
) -> None:
    block = failed_block(store)
    now = time.time()
    with pytest.raises(NotFoundError):
        queue.requeue_block("alice", "0" * 32, max_attempts=3, now=now)
    with pytest.raises(NotFoundError):
        queue.requeue_block("nobody", block.id, max_attempts=3, now=now)
    expiry.set_ttl("alice", TtlChange(1, block_ids=[block.id], now=now - 100))
    with pytest.raises(NotFoundError):
        queue.requeue_block("alice", block.id, max_attempts=3, now=now)
