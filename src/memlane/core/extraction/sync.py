"""Synchronous extraction (``add(..., extract="sync")``): the given jobs run in the caller's thread, with the
code the workers run (:func:`memlane.core.extraction.worker.run_job`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence

from memlane.core.embedding.protocol import CachedEmbedder
from memlane.core.errors import LLMError
from memlane.core.extraction.extractor import Extractor
from memlane.core.extraction.worker import run_job
from memlane.core.jobs import DEFAULT_LEASE_S, JobQueue, JobStatus


def run_now(
    queue: JobQueue,
    extractor: Extractor,
    embedder: CachedEmbedder,
    job_ids: Sequence[int],
    *,
    retry_pause_s: float = 0.5,
    deadline: float | None = None,
    on_error: Callable[[LLMError], None] | None = None,
) -> dict[int, JobStatus]:
    """Run ``job_ids`` now and return how each ended (see :meth:`memlane.core.memory.Memory.run_jobs`).

    A job whose reply was unusable is retried at once, up to its attempts. An LLM that cannot be reached
    (after the client's own retries with backoff) ends the run: that job gives its attempt back and waits
    with the outage backoff, and it and the jobs not run yet stay ``queued`` for a worker, left out of the
    outcome. A job a worker claimed first is waited for until it is done or dead; a job deleted with its user
    meanwhile is left out too. With a ``deadline`` (a :func:`time.monotonic` instant) every LLM call, retry
    and wait ends by then, and the jobs not finished stay ``queued`` for a worker. ``on_error`` sees each
    LLM error."""
    owner = f"sync-{uuid.uuid4().hex[:12]}"
    outcome: dict[int, JobStatus] = {}
    unreachable: list[LLMError] = []

    def note(exc: LLMError, waits: bool) -> None:
        if on_error is not None:
            on_error(exc)
        if waits:
            unreachable.append(exc)

    def time_left() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    pending = list(job_ids)
    pause = retry_pause_s
    while pending and not unreachable and time_left() > 0:
        for job_id in pending:
            if time_left() <= 0:
                break
            for job in queue.claim(owner, 1, DEFAULT_LEASE_S, job_ids=[job_id]):
                status = run_job(job, queue, extractor, embedder, retry_in_s=0.0, on_failure=note, deadline=deadline)
                outcome[job.job_id] = status or JobStatus.DONE
            if unreachable:
                outcome.pop(job_id, None)
                break
        if unreachable:
            break
        waiting = [j for j in pending if outcome.get(j) in (None, JobStatus.QUEUED)]
        now = queue.statuses(waiting) if waiting else {}
        outcome.update({j: st for j, st in now.items() if st in (JobStatus.DONE, JobStatus.DEAD)})
        # Still to run: those that exist and are not finished (queued, or running in another worker).
        pending = [j for j in waiting if j in now and now[j] not in (JobStatus.DONE, JobStatus.DEAD)]
        if pending:
            time.sleep(max(0.0, min(pause, time_left())))
            pause = min(pause * 2, 5.0)
    return outcome
