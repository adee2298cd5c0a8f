"""The durable extraction queue kept in the store (docs/design/002-extraction-queue.md).

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`). What
both dialects make of their rows is written here once (:func:`claimed_jobs`, :func:`queue_status`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from memlane.core.jobs import ClaimedJob, JobError, JobQueue, JobStatus, LLMOutage, QueueStatus
from memlane.core.model import MemoryBlock


class Queue(Protocol):
    """The durable extraction queue kept in the store (docs/design/002-extraction-queue.md)."""

    def job_queue(self) -> JobQueue: ...

    def requeue_block(self, user: str, block_id: str, *, max_attempts: int, now: float) -> MemoryBlock:
        """Queue the block's extraction again (a new job; its dead ones go), its status back to queued,
        ``last_queued_at`` now; the block as it is then. NotFoundError if unknown or expired;
        ValidationError (where ``block_id``) unless its extraction failed."""
        ...


def claimed_jobs(owner: str, rows: Iterable[tuple[Any, ...]], blocks: Mapping[int, MemoryBlock]) -> list[ClaimedJob]:
    """The jobs a claim leased to ``owner``, by job id, from its rows (job id, block reference, attempts, max
    attempts, LLM failures) and their blocks by reference; a job whose block is gone (deleted as the claim
    ran) is left out."""
    return [
        ClaimedJob(
            job_id=int(r[0]),
            owner=owner,
            attempts=int(r[2]),
            max_attempts=int(r[3]),
            block=blocks[int(r[1])],
            block_ref=int(r[1]),
            llm_failures=int(r[4]),
        )
        for r in sorted(rows)
        if int(r[1]) in blocks
    ]


def queue_status(
    counts: Mapping[str, int],
    oldest_queued_age_s: float | None,
    done_last_5_min: int,
    errors: Iterable[Sequence[Any]],
    outage: Sequence[Any] | None,
) -> QueueStatus:
    """The queue's state from a store's reads: the job counts by status, the oldest queued job's age, the
    jobs done in the last 5 minutes, the last errors' rows (job id, block id, user, status, attempts, error,
    time) and the outage's row (jobs waiting for the LLM, its first failure, seconds to the earliest retry,
    the newest error; None or no jobs: no outage)."""
    llm_outage = None
    if outage is not None and outage[0]:
        jobs, since, next_in, error = outage
        llm_outage = LLMOutage(
            jobs=int(str(jobs)), since=float(str(since)), next_try_in_s=float(str(next_in)), last_error=str(error)
        )
    return QueueStatus(
        queued=counts.get("queued", 0),
        running=counts.get("running", 0),
        done=counts.get("done", 0),
        dead=counts.get("dead", 0),
        oldest_queued_age_s=oldest_queued_age_s,
        done_last_5_min=done_last_5_min,
        last_errors=tuple(
            JobError(
                job_id=int(r[0]),
                block_id=str(r[1]),
                user=str(r[2]),
                status=JobStatus(r[3]),
                attempts=int(r[4]),
                error=str(r[5]),
                at=float(r[6]),
            )
            for r in errors
        ),
        llm_outage=llm_outage,
    )
