"""Extraction jobs as values: what a worker claims, what it writes back, and the queue's state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import MemoryBlock

# Failed attempts before a block's extraction fails for good (that API's AGENTMEMORY_MAX_FAIL_COUNT): an
# LLM outage uses none (docs/design/002-extraction-queue.md).
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LEASE_S = 120.0
EXTRACT_KIND = "extract"

CacheEntries = tuple[str, dict[str, Vectors]]
"""Embeddings a write keeps in the store's embedding cache: (the embedder's model id, vectors by text hash)."""


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job leased to ``owner`` until its lease runs out; ``attempts`` counts this one."""

    job_id: int
    owner: str
    attempts: int
    max_attempts: int
    block: MemoryBlock
    block_ref: int  # the store's internal reference of the block
    llm_failures: int = 0  # tries in a row before this one that found the LLM unreachable (attempts not used)


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What an extraction writes: summary and facts, with the embeddings of both as search keys."""

    summary: str
    facts: tuple[str, ...]
    prompt_ref: str  # "<prompt id>@<sha256>"


@dataclass(frozen=True, slots=True)
class JobError:
    job_id: int
    block_id: str
    user: str
    status: JobStatus
    attempts: int
    error: str
    at: float


@dataclass(frozen=True, slots=True)
class LLMOutage:
    """Queued jobs whose last try found the LLM unreachable (a transport failure: no reply at all): they
    wait for it with backoff, their attempts untouched. ``since`` is when the longest-waiting of them first
    failed (epoch seconds), ``next_try_in_s`` how long until the next of them is tried again (0: now),
    ``last_error`` the newest of their errors."""

    jobs: int
    since: float
    next_try_in_s: float
    last_error: str


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Counts by status, the age of the oldest queued job, recent throughput and the last errors; ``llm_outage``
    when queued jobs are waiting for an LLM that could not be reached."""

    queued: int
    running: int
    done: int
    dead: int
    oldest_queued_age_s: float | None
    done_last_5_min: int
    last_errors: tuple[JobError, ...]
    llm_outage: LLMOutage | None = None

    @property
    def throughput_per_min(self) -> float:
        return self.done_last_5_min / 5.0

    @property
    def pending(self) -> int:
        return self.queued + self.running


@dataclass(frozen=True, slots=True)
class Requeued:
    """What a requeue did: ``dead`` jobs queued again with their attempts reset (their blocks back to
    ``queued``), and ``waiting`` jobs (queued, waiting out a backoff after a failure) made ready now."""

    dead: int = 0
    waiting: int = 0

    def __add__(self, other: Requeued) -> Requeued:
        return Requeued(self.dead + other.dead, self.waiting + other.waiting)


@dataclass(frozen=True, slots=True)
class Requeue:
    """Which jobs a requeue (:meth:`JobQueue.requeue`) touches. Every given filter applies; None: any.

    * ``user``: only the jobs of this user.
    * ``since``: only the jobs that failed (or died) at or after this time (epoch seconds).
    * ``block_ids``: only the jobs of these blocks.
    * ``dead_only``: only the dead jobs; when False, also the queued jobs that wait out a backoff after a
      failure.
    """

    user: str | None = None
    since: float | None = None
    block_ids: Sequence[str] | None = None
    dead_only: bool = True


class JobQueue(Protocol):
    """The extraction queue a store keeps beside its blocks (outbox: jobs are written with the blocks).

    Completion is fenced by the lease owner: a worker whose lease ran out (and whose job was redelivered)
    writes nothing.
    """

    def claim(
        self, owner: str, n: int, lease_s: float, *, job_ids: Sequence[int] | None = None
    ) -> list[ClaimedJob]: ...

    def extend(self, owner: str, job_ids: Sequence[int], lease_s: float) -> int: ...

    def complete(
        self, job: ClaimedJob, result: ExtractionResult, vectors: Vectors, cache_entries: CacheEntries | None = None
    ) -> bool:
        """Write summary, facts and their keys, and mark the job done, in one transaction. ``vectors`` are
        the embeddings of ``[summary, *facts]``. False (writing nothing) if the lease was lost."""
        ...

    def fail(self, job: ClaimedJob, error: str, raw: str | None, retry_in_s: float) -> JobStatus | None:
        """A failed attempt (the reply was unusable): back to the queue after ``retry_in_s``, or dead after
        the last attempt. None if the lease was lost."""
        ...

    def defer(self, job: ClaimedJob, error: str, retry_in_s: float) -> JobStatus | None:
        """The LLM could not be reached (an outage, not this job's fault): back to the queue after
        ``retry_in_s`` with the attempt given back, the failure counted in ``llm_failures``. QUEUED, or None
        if the lease was lost."""
        ...

    def requeue(self, which: Requeue) -> Requeued:
        """Queue the dead jobs of ``which`` (:class:`Requeue`) again (attempts reset, their blocks back to
        ``queued``) and, unless ``which.dead_only``, make its jobs that wait out a backoff after a failure
        ready now. Running and done jobs are never touched; a second call finds nothing to do."""
        ...

    def statuses(self, job_ids: Sequence[int]) -> dict[int, JobStatus]:
        """The status of each of ``job_ids`` that still exists (jobs go with their user)."""
        ...

    def status(self, *, recent_errors: int = 5) -> QueueStatus: ...
