"""The six health routes of that API, answered honestly from memlane's own probes.

``GET /health`` needs no key (that API's clients probe it without one after a read timeout) and is exempt
from the Host allowlist like ``/healthz``; it says whether the service runs and whether its store was
found corrupt, and probes nothing (a probe that waits on a busy store would make a slow server look
dead). The others need a key and probe: the store (a real write), the embedder (one text through the
model) and the LLM (configured or not: a server without one says ``not_configured``, never ``healthy``),
the extraction queue in that API's batch-processor shape, and the memory monitor memlane does not have
(``not_initialized``).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

import memlane
from memlane.core.errors import MemlaneError
from memlane.core.jobs import QueueStatus
from memlane.interfaces.http.agent_memory.auth import caller
from memlane.interfaces.http.agent_memory.errors import FlatErrorRoute
from memlane.interfaces.http.routes.ops import embedder_health, store_health
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.errors import public_message, scrub_addresses
from memlane.interfaces.wire.requestid import request_id_of

router = APIRouter(tags=["agent memory: health"], route_class=FlatErrorRoute)
log = logging.getLogger("memlane.http")
_STARTED = time.monotonic()
Word = Literal["healthy", "unhealthy"]
QueueWord = Literal["healthy", "degraded", "unhealthy", "not_initialized"]


class HealthOut(BaseModel):
    status: Word
    version: str
    uptime_seconds: float


class DatabaseHealthOut(BaseModel):
    status: Word
    service: Literal["database"]
    backend: str = Field(description="The store's class: SqliteStore or PostgresStore.")
    details: dict[str, Any] = Field(description="What the probe found: writable, how long it took, the integrity.")


class EmbeddingHealthOut(BaseModel):
    status: Word
    model: str


class LlmHealthOut(BaseModel):
    status: Literal["healthy", "unhealthy", "not_configured"]
    model: str | None


class ModelsHealthOut(BaseModel):
    status: Literal["healthy", "degraded", "unhealthy"]
    embedding: EmbeddingHealthOut
    llm: LlmHealthOut


class QueueOut(BaseModel):
    size: int
    queued_ids: int = Field(description="How many block ids are queued (never the ids).")
    processing: int
    max_size: int


class BatchProcessorOut(BaseModel):
    status: QueueWord
    message: str
    queue: QueueOut
    loop_running: bool
    dispatcher_alive: bool


class RateBudgetOut(BaseModel):
    available_requests: int
    available_tokens: int
    max_requests_per_minute: int
    max_tokens_per_minute: int
    per_request_token_limit: int = Field(description="The per-block token limit of adds.")


class StatisticsOut(BaseModel):
    total_enqueued: int
    total_recovered: int
    total_dispatched: int
    total_completed: int
    total_failed: int
    queue_full: int = Field(description="Adds refused (429) because the extraction queue was full.")
    queue_duplicates: int
    queue_oversized: int
    recovery_duplicates: int
    active_tasks: int
    loop_running: bool
    dispatcher_alive: bool


class BatchProcessorStatsOut(BatchProcessorOut):
    rate_budget: RateBudgetOut
    statistics: StatisticsOut


class MemoryMonitorOut(BaseModel):
    status: Literal["not_initialized"]
    message: str
    accepting_requests: bool
    usage_percent: float | None
    threshold_percent: float | None
    last_check: str | None


def _word(ok: bool) -> Word:
    return "healthy" if ok else "unhealthy"


@router.get("/health", responses={503: {"model": HealthOut, "description": "The store was found corrupt."}})
def health(request: Request, response: Response) -> HealthOut:
    """Whether the service runs: ``healthy``, or ``unhealthy`` (503) once its store was found corrupt. No key."""
    corrupt = services(request).integrity.state().corrupt
    if corrupt:
        response.status_code = 503
    return HealthOut(
        status=_word(not corrupt), version=memlane.__version__, uptime_seconds=round(time.monotonic() - _STARTED, 3)
    )


@router.get("/health/couchbase", responses={503: {"model": DatabaseHealthOut, "description": "The probe failed."}})
def database(request: Request, response: Response) -> DatabaseHealthOut:
    """The store, probed with a real write (named for that API's database; memlane's is SQLite or
    PostgreSQL). 503 with ``details`` when it fails."""
    caller(request)
    svc = services(request)
    probe = store_health(svc.memory, svc.integrity, svc.settings.health_write_timeout_s, request_id_of(request))
    if not probe.ok:
        response.status_code = 503
    backend = type(svc.memory.store).__name__
    return DatabaseHealthOut(status=_word(probe.ok), service="database", backend=backend, details=probe.detail)


@router.get("/health/models")
def models(request: Request) -> ModelsHealthOut:
    """The embedder (probed) and the LLM: ``not_configured`` without one, ``unhealthy`` while the queue
    reports it unreachable, else ``healthy`` (configured and not failing; no call is spent on a probe)."""
    caller(request)
    svc = services(request)
    rid = request_id_of(request)
    embed = embedder_health(svc.memory, rid)
    embedding = EmbeddingHealthOut(status=_word(embed.ok), model=svc.memory.embedder.model_id)
    llm_model = svc.memory.llm
    if llm_model is None:
        llm = LlmHealthOut(status="not_configured", model=None)
    else:
        outage = svc.memory.queue_status(recent_errors=0).llm_outage
        name = getattr(llm_model, "model", None) or type(llm_model).__name__
        llm = LlmHealthOut(status=_word(outage is None), model=str(name))
    overall: Literal["healthy", "degraded", "unhealthy"] = "unhealthy"
    if embed.ok:
        overall = "healthy" if llm.status == "healthy" else "degraded"
    return ModelsHealthOut(status=overall, embedding=embedding, llm=llm)


def _batch_processor(request: Request) -> tuple[BatchProcessorOut, tuple[int, int, int, int]]:
    """That API's batch-processor answer, and the queue's counts (queued, running, done, dead): ``healthy``;
    ``degraded`` while jobs wait for an LLM that cannot be reached or the queue is full (the message says
    which, since when, and the last error, without addresses); ``unhealthy`` when the queue cannot be read;
    ``not_initialized`` without an LLM."""
    caller(request)
    svc = services(request)
    llm = svc.memory.llm is not None
    capacity = svc.settings.agent_queue_max
    status: QueueWord
    try:
        st = svc.memory.queue_status(recent_errors=0)
    except MemlaneError as exc:
        rid = request_id_of(request)
        log.error("request %s: health: the queue failed: %s: %s", rid, type(exc).__name__, exc)
        status, counts, problems = "unhealthy", (0, 0, 0, 0), [public_message(exc, rid)]
    else:
        counts = (st.queued, st.running, st.done, st.dead)
        problems = _queue_problems(st, capacity)
        status = "degraded" if problems else "healthy"
    if not llm and status != "unhealthy":
        status, problems = "not_initialized", ["no LLM is configured: blocks are stored ready, without extraction"]
    queued, running = counts[0], counts[1]
    answer = BatchProcessorOut(
        status=status,
        message="; ".join(problems) or "extraction queue",
        # ``queued_ids`` is how many ids are queued (that API's type), never the ids: they are users' block ids,
        # and this route answers any key.
        queue=QueueOut(size=queued, queued_ids=queued, processing=running, max_size=capacity),
        loop_running=llm,
        dispatcher_alive=llm,
    )
    return answer, counts


def _queue_problems(st: QueueStatus, capacity: int) -> list[str]:
    """What keeps the queue from extracting as it should: an LLM outage, a full queue."""
    problems = []
    outage = st.llm_outage
    if outage is not None:
        since = datetime.fromtimestamp(outage.since, tz=UTC).isoformat()
        problems.append(
            f"extraction waits for the LLM, unreachable since {since}: {outage.jobs} "
            f"block{'' if outage.jobs == 1 else 's'} queued for it, next try in {outage.next_try_in_s:.0f} s; "
            f"last error: {scrub_addresses(outage.last_error)}"
        )
    if st.queued >= capacity:
        problems.append(f"the extraction queue is full ({st.queued} of {capacity} blocks): adds that queue more: 429")
    return problems


@router.get("/health/async-batch-processor")
def batch_processor(request: Request) -> BatchProcessorOut:
    """The extraction queue: its size and how many jobs run (``not_initialized`` without an LLM)."""
    return _batch_processor(request)[0]


@router.get("/health/async-batch-processor-stats")
def batch_processor_stats(request: Request) -> BatchProcessorStatsOut:
    """The same, with the queue's totals as that API's statistics. memlane has no model rate budget of its
    own: its fields are 0, and ``per_request_token_limit`` is the per-block token limit of adds."""
    answer, (queued, running, done, dead) = _batch_processor(request)
    svc = services(request)
    return BatchProcessorStatsOut(
        **answer.model_dump(),
        rate_budget=RateBudgetOut(
            available_requests=0,
            available_tokens=0,
            max_requests_per_minute=0,
            max_tokens_per_minute=0,
            per_request_token_limit=svc.settings.agent_block_tokens,
        ),
        statistics=StatisticsOut(
            total_enqueued=queued + running + done + dead,
            total_recovered=0,
            total_dispatched=running + done + dead,
            total_completed=done,
            total_failed=dead,
            queue_full=svc.agent_queue_full.value,
            queue_duplicates=0,
            queue_oversized=0,
            recovery_duplicates=0,
            active_tasks=running,
            loop_running=answer.loop_running,
            dispatcher_alive=answer.dispatcher_alive,
        ),
    )


@router.get("/health/memory")
def memory_monitor(request: Request) -> MemoryMonitorOut:
    """memlane has no memory-pressure monitor: ``not_initialized``, and requests are accepted."""
    caller(request)
    return MemoryMonitorOut(
        status="not_initialized",
        message="memlane has no memory monitor; ingestion is never refused for memory pressure",
        accepting_requests=True,
        usage_percent=None,
        threshold_percent=None,
        last_check=None,
    )
