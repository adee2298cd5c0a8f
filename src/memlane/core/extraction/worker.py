"""Running extraction jobs: one job (shared by the worker and the synchronous mode) and the worker loop."""

from __future__ import annotations

import logging
import random
import signal
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from memlane.core.embedding.protocol import CachedEmbedder
from memlane.core.errors import LLMError, LLMResponseError
from memlane.core.extraction.extractor import Extractor
from memlane.core.jobs import DEFAULT_LEASE_S, ClaimedJob, JobQueue, JobStatus

log = logging.getLogger("memlane.worker")

RETRY_BASE_S = 5.0
RETRY_CAP_S = 600.0


def retry_delay(attempts: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with full jitter after the ``attempts``-th failure."""
    cap = min(RETRY_CAP_S, RETRY_BASE_S * 2 ** max(0, attempts - 1))
    return (rng or random).uniform(cap / 2, cap)


def run_job(
    job: ClaimedJob,
    queue: JobQueue,
    extractor: Extractor,
    embedder: CachedEmbedder,
    *,
    retry_in_s: float | None = None,
    on_failure: Callable[[LLMError], None] | None = None,
) -> JobStatus | None:
    """Extract one claimed job and record the outcome. Returns DONE, QUEUED (will retry), DEAD, or None when
    the lease was lost and nothing was written. LLM errors become job data, never exceptions (``on_failure``
    sees them too). A failed job is retried after ``retry_in_s`` (default: exponential backoff with jitter)."""
    try:
        result = extractor.extract(job.block)
    except LLMError as exc:
        if on_failure is not None:
            on_failure(exc)
        raw = exc.raw if isinstance(exc, LLMResponseError) else None
        delay = retry_delay(job.attempts) if retry_in_s is None else retry_in_s
        final = job.attempts >= job.max_attempts
        log.warning(
            "extraction of block %s failed (attempt %d of %d%s): %s",
            job.block.id,
            job.attempts,
            job.max_attempts,
            ", giving up" if final else "",
            exc,
        )
        status = queue.fail(job, f"{type(exc).__name__}: {exc}", raw, delay)
    else:
        vectors, cache = embedder.embed_deferred([result.summary, *result.facts])
        done = queue.complete(job, result, vectors, (embedder.model_id, cache))
        status = JobStatus.DONE if done else None
    if status is None and not queue.statuses([job.job_id]):
        # The job went with its user (or its block) while the LLM call was in flight: so do the calls it
        # logged, which hold the block's text and which the user's deletion could not see yet.
        extractor.forget(job.block)
    return status


@dataclass
class WorkerStats:
    done: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0
    errors: list[str] = field(default_factory=list)
    sweeps: int = 0
    sweep_errors: list[str] = field(default_factory=list)


class Worker:
    """Drains the queue with ``concurrency`` jobs in flight; a heartbeat extends the leases of running jobs.

    ``stop()`` (or SIGTERM through :meth:`install_signal_handlers`) stops claiming; jobs in flight finish
    (or, if the process dies, their leases lapse and another worker takes them).
    """

    def __init__(
        self,
        queue: JobQueue,
        extractor: Extractor,
        embedder: CachedEmbedder,
        *,
        concurrency: int = 4,
        lease_s: float = DEFAULT_LEASE_S,
        poll_s: float = 1.0,
        owner: str | None = None,
        retry_in: Callable[[int], float] = retry_delay,
        sweep: Callable[[], object] | None = None,
        sweep_every_s: float | None = None,
    ) -> None:
        """``sweep`` (with ``sweep_every_s``): periodic work beside the jobs, on a thread of its own: run once
        when the worker starts, then every ``sweep_every_s`` seconds until it stops (the retention sweep,
        :meth:`memlane.core.memory.Memory.apply_retention`). A sweep that fails is logged and counted in
        ``stats.sweep_errors``; the next one runs on time."""
        self.queue = queue
        self.extractor = extractor
        self.embedder = embedder
        self.concurrency = max(1, concurrency)
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.owner = owner or f"worker-{uuid.uuid4().hex[:12]}"
        self.retry_in = retry_in
        self.stats = WorkerStats()
        self.sweep = sweep
        self.sweep_every_s = sweep_every_s
        self._stop = threading.Event()
        self._inflight: dict[int, Future[JobStatus | None]] = {}
        self._lock = threading.Lock()

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _s, _f: self.stop())

    def run(self, *, drain: bool = False, on_progress: Callable[[WorkerStats], None] | None = None) -> WorkerStats:
        """Work until stopped, or with ``drain`` until no job is queued or running."""
        heartbeat = threading.Thread(target=self._heartbeat, name="memlane-heartbeat", daemon=True)
        heartbeat.start()
        sweeper = threading.Thread(target=self._sweeper, name="memlane-sweep", daemon=True)
        if self.sweep is not None and self.sweep_every_s:
            sweeper.start()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="memlane-job") as pool:
            while not self._stop.is_set():
                self._reap_finished(on_progress)
                free = self.concurrency - len(self._inflight)
                jobs = self.queue.claim(self.owner, free, self.lease_s) if free > 0 else []
                for job in jobs:
                    fut = pool.submit(
                        run_job, job, self.queue, self.extractor, self.embedder, retry_in_s=self.retry_in(job.attempts)
                    )
                    with self._lock:
                        self._inflight[job.job_id] = fut
                if jobs:
                    continue
                if drain and not self._inflight and self.queue.status(recent_errors=0).pending == 0:
                    break
                self._stop.wait(self.poll_s if not self._inflight else min(self.poll_s, 0.05))
            for fut in list(self._inflight.values()):
                fut.result()
            self._reap_finished(on_progress)
        self._stop.set()
        heartbeat.join(timeout=5)
        if sweeper.is_alive():
            sweeper.join()  # a sweep in progress finishes its batch: each is a transaction of its own
        return self.stats

    def _sweeper(self) -> None:
        assert self.sweep is not None and self.sweep_every_s
        while not self._stop.is_set():
            try:
                self.sweep()
                self.stats.sweeps += 1
            except Exception as exc:  # a store failure: the next sweep retries; nothing is half-deleted
                log.exception("retention sweep failed")
                self.stats.sweep_errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.sweep_every_s)

    def _reap_finished(self, on_progress: Callable[[WorkerStats], None] | None) -> None:
        with self._lock:
            finished = [(jid, f) for jid, f in self._inflight.items() if f.done()]
            for jid, _ in finished:
                del self._inflight[jid]
        for jid, fut in finished:
            try:
                status = fut.result()
            except Exception as exc:  # a bug or a store failure: keep the worker alive, the lease will lapse
                log.exception("job %s crashed", jid)
                self.stats.errors.append(f"job {jid}: {type(exc).__name__}: {exc}")
                continue
            if status is JobStatus.DONE:
                self.stats.done += 1
            elif status is JobStatus.QUEUED:
                self.stats.retried += 1
            elif status is JobStatus.DEAD:
                self.stats.dead += 1
            else:
                self.stats.lost += 1
        if finished and on_progress:
            on_progress(self.stats)

    def _heartbeat(self) -> None:
        interval = max(0.05, self.lease_s / 3)
        while not self._stop.wait(interval):
            with self._lock:
                ids = list(self._inflight)
            if ids:
                try:
                    self.queue.extend(self.owner, ids, self.lease_s)
                except Exception:  # the next beat retries; a lapsed lease only means redelivery
                    log.exception("heartbeat failed")
