"""Operations: health (the only route without a key) and Prometheus metrics."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from memlane.core.errors import MemlaneError
from memlane.core.memory import Memory
from memlane.interfaces.http.auth import Admin
from memlane.interfaces.http.integrity import Integrity, IntegrityWatch
from memlane.interfaces.http.routes.llm import llm_component
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.errors import CORRUPT, is_corrupt
from memlane.interfaces.wire.requestid import request_id_of
from memlane.interfaces.wire.schemas import ComponentOut, HealthOut, error_responses

router = APIRouter(tags=["operations"])
PROBE_TEXT = "memlane health probe"
log = logging.getLogger("memlane.http")


def _elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _failed(component: str, exc: MemlaneError, rid: str | None) -> ComponentOut:
    """A failed component: a safe reason in the body, the exception's text (paths, SQL) in the log."""
    log.error("request %s: health: %s failed: %s: %s", rid, component, type(exc).__name__, exc)
    reason = getattr(exc, "reason", None) or f"{component} unavailable"
    return ComponentOut(ok=False, detail={"reason": reason, "request_id": rid})


def store_health(memory: Memory, integrity: IntegrityWatch, timeout_s: float, rid: str | None) -> ComponentOut:
    """The write probe, and the integrity the scheduled quick check (or a request) found: a corrupt store is
    unhealthy even when the probe's row lands on a sound page."""
    start = time.perf_counter()
    try:
        memory.probe_write(timeout_s)
    except MemlaneError as exc:
        if is_corrupt(exc):
            integrity.mark_corrupt(f"health probe: {exc}")
        failed = _failed("store", exc, rid)
        failed.detail["writable"] = False
        failed.detail["integrity"] = _integrity(integrity.state())
        return failed
    state = integrity.state()
    if state.corrupt:
        log.error("request %s: health: the store is corrupt: %s", rid, "; ".join(state.problems[:5]))
        detail = {"writable": True, "reason": CORRUPT, "request_id": rid, "integrity": _integrity(state)}
        return ComponentOut(ok=False, detail=detail)
    detail = {"writable": True, "probe_ms": _elapsed_ms(start), "integrity": _integrity(state)}
    return ComponentOut(ok=True, detail=detail)


def _integrity(state: Integrity) -> dict[str, object]:
    """What the body says of the integrity check: its verdict, when and by what; never the problems'
    text (pages, tables, SQL), which is in the server log."""
    at = None if state.at is None else datetime.fromtimestamp(state.at, tz=UTC).isoformat()
    return {"corrupt": state.corrupt, "checked_at": at, "source": state.source if state.at else None}


def queue_health(memory: Memory, rid: str | None) -> ComponentOut:
    try:
        st = memory.queue_status(recent_errors=0)
    except MemlaneError as exc:
        return _failed("queue", exc, rid)
    detail = {"queued": st.queued, "running": st.running, "done": st.done, "dead": st.dead}
    # Jobs waiting for an LLM that cannot be reached: the queue itself works, so this is said, not failed.
    waiting = 0 if st.llm_outage is None else st.llm_outage.jobs
    return ComponentOut(ok=True, detail={**detail, "oldest_s": st.oldest_queued_age_s, "llm_waiting": waiting})


def embedder_health(memory: Memory, rid: str | None) -> ComponentOut:
    start = time.perf_counter()
    try:
        # The model itself, not the cache in front of it: this is what a search runs first.
        memory.embedder.inner.embed([PROBE_TEXT])
    except MemlaneError as exc:
        return _failed("embedder", exc, rid)
    detail = {"model_id": memory.embedder.model_id, "dim": memory.embedder.dim, "probe_ms": _elapsed_ms(start)}
    return ComponentOut(ok=True, detail=detail)


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
def healthz(request: Request) -> JSONResponse:
    """The store (a real write, committed: 503 when one would fail, with the reason: disk full, read-only,
    locked, unreachable; and 503 ``corrupt`` when the scheduled quick integrity check or a request found a
    damaged page), the queue (its counts) and the embedder (one short text through the model), each probed
    now; 503 if any fails. ``llm`` says whether this server has an LLM and whether extraction waits for one
    that cannot be reached: information, never a 503. No key needed; no user data shown."""
    svc = services(request)
    rid = request_id_of(request)
    store = store_health(svc.memory, svc.integrity, svc.settings.health_write_timeout_s, rid)
    queue = queue_health(svc.memory, rid)
    embedder = embedder_health(svc.memory, rid)
    ok = store.ok and embedder.ok and queue.ok
    # Information only: without its LLM the service adds and searches; extraction waits for it.
    llm = llm_component(svc.memory, int(queue.detail.get("llm_waiting", 0)))
    health = HealthOut(status="ok" if ok else "unhealthy", store=store, embedder=embedder, queue=queue, llm=llm)
    return JSONResponse(health.model_dump(), status_code=200 if ok else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, **error_responses(401, 403)},
)
def metrics(_: Admin, request: Request) -> Response:
    """Prometheus exposition text. Admin key (a scraper sends it as its bearer token)."""
    body, content_type = services(request).metrics.render()
    return Response(content=body, media_type=content_type)
