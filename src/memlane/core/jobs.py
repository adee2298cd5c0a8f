"""Extraction jobs as values: what a worker claims, what it writes back, and the queue's state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import MemoryBlock

DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_LEASE_S = 120.0
EXTRACT_KIND = "extract"


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
class QueueStatus:
    """Counts by status, the age of the oldest queued job, recent throughput and the last errors."""

    queued: int
    running: int
    done: int
    dead: int
    oldest_queued_age_s: float | None
    done_last_5_min: int
    last_errors: tuple[JobError, ...]

    @property
    def throughput_per_min(self) -> float:
        return self.done_last_5_min / 5.0

    @property
    def pending(self) -> int:
        return self.queued + self.running


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
        self,
        job: ClaimedJob,
        result: ExtractionResult,
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
    ) -> bool: ...

    def fail(self, job: ClaimedJob, error: str, raw: str | None, retry_in_s: float) -> JobStatus | None: ...

    def statuses(self, job_ids: Sequence[int]) -> dict[int, JobStatus]:
        """The status of each of ``job_ids`` that still exists (jobs go with their user)."""
        ...

    def status(self, *, recent_errors: int = 5) -> QueueStatus: ...
