"""Extraction as a service of :class:`memlane.core.memory.Memory`: the queue's runs (now, in this thread, or
by a worker), its status, and requeuing what failed, with the memory's LLM, prompt and embedder."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memlane.core.bounds import (
    MAX_CONCURRENCY,
    MAX_PAGE,
    MAX_PERIOD_S,
    MAX_ROW_ID,
    MIN_WAIT_S,
    check_int,
    check_seconds,
)
from memlane.core.errors import ConfigError, LLMError, NotFoundError, ValidationError
from memlane.core.extraction.extractor import Extractor
from memlane.core.extraction.sync import run_now
from memlane.core.extraction.worker import Worker, retry_delay
from memlane.core.jobs import DEFAULT_LEASE_S, JobStatus, QueueStatus, Requeue, Requeued
from memlane.core.model import UserInfo
from memlane.core.names import check_stored_name, check_text
from memlane.core.services import BlockService
from memlane.core.store.users import Users
from memlane.core.timefmt import coerce_time, to_epoch


def known_user(store: Users, user: str) -> UserInfo:
    """The user, or NotFoundError (read from the list of users: what retention and requeue name)."""
    for info in store.list_users():
        if info.name == user:
            return info
    raise NotFoundError(f"user {user!r} not found")


@dataclass(eq=False)
class Extraction(BlockService):
    """The extraction of one memory's blocks. ``sweep`` is what a worker also runs on a schedule (the
    retention sweep)."""

    sweep: Callable[[], object]

    def extractor(self) -> Extractor:
        """The extractor of this memory's LLM and prompt; ConfigError without an LLM."""
        if self.settings.llm is None:
            raise ConfigError("extraction needs an LLM (Memory(..., llm=...) or --llm)")
        return Extractor(self.settings.llm, self.settings.prompt, prompts=self.store.get_prompt_version)

    def run_jobs(
        self,
        job_ids: Sequence[int],
        *,
        retry_pause_s: float = 0.5,
        timeout_s: float | None = None,
        on_error: Callable[[LLMError], None] | None = None,
    ) -> dict[int, JobStatus]:
        """Run the given jobs now, in this thread, with the same code as the workers (synchronous mode).

        A job whose reply was unusable is retried here at once, up to its attempts, and ends ``dead`` with
        its error kept. A server that cannot be reached (the LLM client has already retried it with backoff)
        ends the run: that job (its attempt given back) and the ones not run yet stay ``queued`` for a
        worker, and are left out of the returned outcome. A job a worker claimed first is waited for until it
        is done or dead; a job deleted with its user meanwhile is left out too. ``timeout_s``: return within
        this long, the LLM client's retries and waits included; the jobs not finished by then stay
        ``queued`` for a worker. ``on_error`` sees each LLM error."""
        ids = [check_int(j, f"job_ids[{i}]", 1, MAX_ROW_ID, "a job id") for i, j in enumerate(job_ids)]
        pause = check_seconds(retry_pause_s, "retry_pause_s", 0, MAX_PERIOD_S)
        deadline = None
        if timeout_s is not None:
            deadline = time.monotonic() + check_seconds(timeout_s, "timeout_s", 0, MAX_PERIOD_S)
        return run_now(
            self.queue,
            self.extractor(),
            self.embedder,
            ids,
            retry_pause_s=pause,
            deadline=deadline,
            on_error=on_error,
        )

    def worker(
        self,
        *,
        concurrency: int = 4,
        lease_s: float = DEFAULT_LEASE_S,
        poll_s: float = 1.0,
        retry_in: Callable[[int], float] = retry_delay,
        retention_every_s: float | None = None,
    ) -> Worker:
        """A worker draining this store's queue with this memory's LLM and embedder. ``retry_in(attempts)``
        is the pause before a failed job is tried again (default: exponential backoff with jitter).
        ``retention_every_s``: also run :meth:`apply_retention` when the worker starts and then at this
        interval (None or 0: never)."""
        every = retention_every_s
        if every is not None:
            every = check_seconds(every, "retention_every_s", 0, MAX_PERIOD_S)
        return Worker(
            self.queue,
            self.extractor(),
            self.embedder,
            concurrency=check_int(concurrency, "concurrency", 1, MAX_CONCURRENCY),
            lease_s=check_seconds(lease_s, "lease_s", MIN_WAIT_S, MAX_PERIOD_S),
            poll_s=check_seconds(poll_s, "poll_s", MIN_WAIT_S, MAX_PERIOD_S),
            retry_in=retry_in,
            sweep=self.sweep,
            sweep_every_s=every or None,
        )

    def queue_status(self, *, recent_errors: int = 5) -> QueueStatus:
        """The queue's counts, throughput, last errors and LLM outage, if any."""
        return self.queue.status(recent_errors=check_int(recent_errors, "recent_errors", 0, MAX_PAGE))

    def requeue(
        self,
        *,
        user: str | None = None,
        since: datetime | str | float | None = None,
        block_ids: Sequence[str] | None = None,
        dead_only: bool = True,
    ) -> Requeued:
        """Queue the dead extraction jobs again, attempts reset and their blocks back to ``queued``; unless
        ``dead_only``, also run now the jobs that wait out a backoff after a failure (an unreachable LLM, an
        unusable reply). Only ``user``'s (NotFoundError for an unknown user), only the jobs of ``block_ids``,
        only those that failed or died at or after ``since``, when given. Idempotent: a second call finds
        nothing to do. Running and done jobs are never touched."""
        if user is not None:
            known_user(self.store, check_stored_name(user, "user"))
        at = coerce_time(since, where="since")
        if isinstance(block_ids, str):
            raise ValidationError("must be a list of block ids, not one string", where="block_ids")
        ids = None if block_ids is None else [check_text(b, f"block_ids[{i}]") for i, b in enumerate(block_ids)]
        return self.queue.requeue(Requeue(user, None if at is None else to_epoch(at), ids, dead_only))
