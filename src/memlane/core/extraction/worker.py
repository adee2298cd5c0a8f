"""Running extraction jobs: one job (shared by the worker and the synchronous mode) and the worker loop."""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from memlane.core.embedding.protocol import CachedEmbedder
from memlane.core.errors import LLMError, LLMResponseError, LLMTransportError, StoreError
from memlane.core.extraction.extractor import Extractor
from memlane.core.jobs import DEFAULT_LEASE_S, ClaimedJob, JobQueue, JobStatus

log = logging.getLogger("memlane.worker")

RETRY_BASE_S = 5.0
RETRY_CAP_S = 600.0
# An LLM that cannot be reached is waited for, without end and without using up attempts: a job is tried
# again after 10 s, then 20, 40, ... up to 5 minutes between tries, and the worker itself claims nothing
# for a pause that grows the same way up to a minute, so an outage costs a few probes, not the queue.
OUTAGE_BASE_S = 10.0
OUTAGE_CAP_S = 300.0
WORKER_PAUSE_CAP_S = 60.0
# Jobs remembered as failing in a way that may be their own (:meth:`Worker._persists`); past this many the
# memory is dropped, which only means waiting longer before such a job is blamed.
MAX_FAILING_JOBS = 100_000


def retry_delay(attempts: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter (between half and all of the step) after the ``attempts``-th failure."""
    cap = min(RETRY_CAP_S, RETRY_BASE_S * 2 ** max(0, attempts - 1))
    return (rng or random).uniform(cap / 2, cap)


def outage_delay(failures: int, rng: random.Random | None = None, *, cap_s: float = OUTAGE_CAP_S) -> float:
    """How long a job waits after its ``failures``-th try in a row found the LLM unreachable: bounded
    exponential backoff with jitter (between half and all of ``min(cap_s, 10 s * 2**(failures - 1))``)."""
    cap = min(cap_s, OUTAGE_BASE_S * 2 ** min(max(0, failures - 1), 30))
    return (rng or random).uniform(cap / 2, cap)


def is_outage(exc: LLMError) -> bool:
    """Whether ``exc`` says the LLM could not serve any request now (no reply at all), rather than that
    this job's request or reply was bad: an outage does not use up the job's attempts."""
    return isinstance(exc, LLMTransportError) and exc.outage


def could_be_the_job(exc: LLMError) -> bool:
    """An outage as far as one request can tell, which the job's own request may have caused (429, 408,
    502-504, a timeout, a dropped connection): whose it is, only the other jobs tell (:class:`Worker`)."""
    return isinstance(exc, LLMTransportError) and exc.outage and exc.could_be_the_request


def run_job(
    job: ClaimedJob,
    queue: JobQueue,
    extractor: Extractor,
    embedder: CachedEmbedder,
    *,
    retry_in_s: float | None = None,
    on_failure: Callable[[LLMError, bool], None] | None = None,
    outage_in: Callable[[int], float] = outage_delay,
    deadline: float | None = None,
    persists: Callable[[], bool] | None = None,
) -> JobStatus | None:
    """Extract one claimed job and record the outcome. Returns DONE, QUEUED (will retry), DEAD, or None when
    the lease was lost and nothing was written. LLM errors become job data, never exceptions
    (``on_failure(error, waits)`` sees them too, before the job is put back). A job whose request or reply
    failed is retried after ``retry_in_s`` (default: exponential backoff with jitter) and dies after its last
    attempt; a job that found the LLM unreachable gives its attempt back and waits ``outage_in(failures in a
    row)`` (:func:`outage_delay`). A failure that :func:`could_be_the_job` is the job's when ``persists()``
    says so (it failed so before while other jobs were served), else the LLM's. ``deadline`` (a
    :func:`time.monotonic` instant): the LLM call ends by then (a synchronous caller's bound); running out
    of time is not the job's fault, and it waits as for an unreachable LLM."""
    try:
        result = extractor.extract(job.block, deadline=deadline)
    except LLMError as exc:
        waits = is_outage(exc) and not (could_be_the_job(exc) and persists is not None and persists())
        if on_failure is not None:
            on_failure(exc, waits)
        error = f"{type(exc).__name__}: {exc}"
        if waits:
            delay = outage_in(job.llm_failures + 1)
            log.warning(
                "extraction of block %s waits for the LLM (unreachable %d time%s in a row; next try in %.0f s): %s",
                job.block.id,
                job.llm_failures + 1,
                "" if job.llm_failures == 0 else "s",
                delay,
                exc,
            )
            status = queue.defer(job, error, delay)
        else:
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
            status = queue.fail(job, error, raw, delay)
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
    waited: int = 0  # tries that found the LLM unreachable (the jobs wait for it, their attempts kept)
    llm_unreachable: bool = False  # a drain ended because the LLM could not be reached (the jobs stay queued)
    claims_refused: int = 0  # claims the store could not take (a full disk, a database down): tried again
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
        outage_in: Callable[[int], float] = outage_delay,
        pause_in: Callable[[int], float] | None = None,
    ) -> None:
        """``sweep`` (with ``sweep_every_s``): periodic work beside the jobs, on a thread of its own: run once
        when the worker starts, then every ``sweep_every_s`` seconds until it stops (the retention sweep,
        :meth:`memlane.core.memory.Memory.apply_retention`). A sweep that fails is logged and counted in
        ``stats.sweep_errors``; the next one runs on time.

        ``outage_in(failures)`` is how long a job that found the LLM unreachable waits; ``pause_in(n)`` how
        long the worker claims nothing after the n-th such try in a row (default: :func:`outage_delay` up to
        :data:`WORKER_PAUSE_CAP_S`); a reply, good or bad, ends the pause. A claim the store refuses (a full
        disk, a database that is down) is tried again at the next poll."""
        self.queue = queue
        self.extractor = extractor
        self.embedder = embedder
        self.concurrency = max(1, concurrency)
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.owner = owner or f"worker-{uuid.uuid4().hex[:12]}"
        self.retry_in = retry_in
        self.outage_in = outage_in
        self.pause_in = pause_in or (lambda n: outage_delay(n, cap_s=WORKER_PAUSE_CAP_S))
        self._outages = 0  # tries in a row that found the LLM unreachable
        # Whose failure is it (docs/design/002-extraction-queue.md, "Whose failure"): the jobs whose last
        # tries failed in a way that could be their own, and the order of the last extraction that succeeded
        # and the last try that found the whole LLM failing.
        self._failing: set[int] = set()
        self._events = 0
        self._last_served = 0
        self._last_unserved = 0
        self._paused_until = 0.0
        self._waiting: set[int] = set()  # jobs whose last try here found the LLM unreachable
        self._refusing = False  # the store refused the last claim
        self.stats = WorkerStats()
        self.sweep = sweep
        self.sweep_every_s = sweep_every_s
        self._stop = threading.Event()
        # Each run of a job by its future: a job put back with no delay can be claimed again before the
        # first run's result is read, so the job id alone would lose that result.
        self._inflight: dict[Future[JobStatus | None], int] = {}
        self._lock = threading.Lock()

    def stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _s, _f: self.stop())

    def run(self, *, drain: bool = False, on_progress: Callable[[WorkerStats], None] | None = None) -> WorkerStats:
        """Work until stopped, or with ``drain`` until no job is queued or running, or the LLM cannot be
        reached (``stats.llm_unreachable``: the jobs stay queued for a later run)."""
        heartbeat = threading.Thread(target=self._heartbeat, name="memlane-heartbeat", daemon=True)
        heartbeat.start()
        sweeper = threading.Thread(target=self._sweeper, name="memlane-sweep", daemon=True)
        if self.sweep is not None and self.sweep_every_s:
            sweeper.start()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="memlane-job") as pool:
            while not self._stop.is_set():
                self._reap_finished(on_progress)
                if drain and self._outages:
                    # Draining waits for jobs, not for an LLM that cannot be reached: they stay queued.
                    if not self._inflight:
                        self.stats.llm_unreachable = True
                        break
                    self._stop.wait(min(self.poll_s, 0.05))
                    continue
                jobs = self._claim()
                for job in jobs:
                    fut = pool.submit(self._run, job)
                    with self._lock:
                        self._inflight[fut] = job.job_id
                if jobs:
                    continue
                if drain and not self._inflight and self._drained():
                    break
                self._stop.wait(self.poll_s if not self._inflight else min(self.poll_s, 0.05))
            for fut in list(self._inflight):
                fut.result()
            self._reap_finished(on_progress)
        self._stop.set()
        heartbeat.join(timeout=5)
        if sweeper.is_alive():
            sweeper.join()  # a sweep in progress finishes its batch: each is a transaction of its own
        return self.stats

    def _claim(self) -> list[ClaimedJob]:
        free = self.concurrency - len(self._inflight)
        if free <= 0 or time.monotonic() < self._paused_until:
            return []
        try:
            jobs = self.queue.claim(self.owner, free, self.lease_s)
        except StoreError as exc:  # the store cannot take the claim now: nothing was leased, try again later
            if not self._refusing:  # once per stretch of refusals, not once per poll
                log.warning("cannot claim jobs (%s); trying again every %.0f s", exc.reason or exc, self.poll_s)
            self._refusing = True
            self.stats.claims_refused += 1
            return []
        if self._refusing:
            log.warning("claims work again")
            self._refusing = False
        return jobs

    def _drained(self) -> bool:
        """No job queued or running (a store that cannot say is not drained)."""
        try:
            return self.queue.status(recent_errors=0).pending == 0
        except StoreError:
            return False

    def _run(self, job: ClaimedJob) -> JobStatus | None:
        """:func:`run_job`, and the worker's pause: an unreachable LLM pauses the claims (longer after each
        such try in a row), from before the job is put back, so the worker does not claim it again at once;
        a reply, good or bad, ends the pause."""
        outage = False

        def note(exc: LLMError, waits: bool) -> None:
            nonlocal outage
            if waits:
                outage = True
                with self._lock:
                    self._outages += 1
                    self._paused_until = time.monotonic() + self.pause_in(self._outages)
                    self._events += 1
                    self._last_unserved = self._events

        status = run_job(
            job,
            self.queue,
            self.extractor,
            self.embedder,
            retry_in_s=self.retry_in(job.attempts),
            on_failure=note,
            outage_in=self.outage_in,
            persists=lambda: self._persists(job.job_id),
        )
        with self._lock:
            if outage and status is JobStatus.QUEUED:
                self._waiting.add(job.job_id)
            elif not outage and status is not None:
                self._outages, self._paused_until = 0, 0.0
            if status is JobStatus.DONE:
                self._events += 1
                self._last_served = self._events
            if status is not JobStatus.QUEUED:
                self._failing.discard(job.job_id)
        return status

    def _persists(self, job_id: int) -> bool:
        """Whether a failure of ``job_id`` that could be its own is: its tries failed so before, and the
        LLM is serving the other jobs (an extraction succeeded after the last try that found it failing
        as a whole). While every request fails, it is the LLM's: the job waits, its attempts kept."""
        with self._lock:
            blamed = job_id in self._failing and self._last_served > self._last_unserved
            if len(self._failing) >= MAX_FAILING_JOBS:
                self._failing.clear()
            self._failing.add(job_id)
            return blamed

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
            finished = [(jid, f) for f, jid in self._inflight.items() if f.done()]
            for _, done in finished:
                del self._inflight[done]
        for jid, fut in finished:
            try:
                status = fut.result()
            except Exception as exc:  # a bug or a store failure: keep the worker alive, the lease will lapse
                log.exception("job %s crashed", jid)
                self.stats.errors.append(f"job {jid}: {type(exc).__name__}: {exc}")
                continue
            if status is JobStatus.DONE:
                self.stats.done += 1
            elif status is JobStatus.QUEUED and self._took_waiting(jid):
                self.stats.waited += 1
            elif status is JobStatus.QUEUED:
                self.stats.retried += 1
            elif status is JobStatus.DEAD:
                self.stats.dead += 1
            else:
                self.stats.lost += 1
        if finished and on_progress:
            on_progress(self.stats)

    def _took_waiting(self, job_id: int) -> bool:
        with self._lock:
            if job_id in self._waiting:
                self._waiting.discard(job_id)
                return True
            return False

    def _heartbeat(self) -> None:
        interval = max(0.05, self.lease_s / 3)
        while not self._stop.wait(interval):
            with self._lock:
                ids = sorted(set(self._inflight.values()))
            if ids:
                try:
                    self.queue.extend(self.owner, ids, self.lease_s)
                except Exception:  # the next beat retries; a lapsed lease only means redelivery
                    log.exception("heartbeat failed")
