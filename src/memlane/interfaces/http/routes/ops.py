"""Operations: health (the only route without a key) and Prometheus metrics."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from memlane.core.errors import MemlaneError
from memlane.interfaces.http.auth import Admin
from memlane.interfaces.http.schemas import ComponentOut, HealthOut, error_responses
from memlane.interfaces.http.services import services

router = APIRouter(tags=["operations"])
PROBE_TEXT = "memlane health probe"


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
def healthz(request: Request) -> JSONResponse:
    """Store, embedder and queue, each probed now; 503 if any fails. No key needed; no user data shown."""
    memory = services(request).memory
    try:
        st = memory.queue_status(recent_errors=0)
        store = ComponentOut(ok=True)
        queue = ComponentOut(
            ok=True,
            detail={"queued": st.queued, "running": st.running, "dead": st.dead, "oldest_s": st.oldest_queued_age_s},
        )
    except MemlaneError as exc:
        store = ComponentOut(ok=False, detail={"error": str(exc)})
        queue = ComponentOut(ok=False, detail={"error": "store unavailable"})
    start = time.perf_counter()
    try:
        # The model itself, not the cache in front of it: this is what a search runs first.
        memory.embedder.inner.embed([PROBE_TEXT])
        embedder = ComponentOut(
            ok=True,
            detail={
                "model_id": memory.embedder.model_id,
                "dim": memory.embedder.dim,
                "probe_ms": round((time.perf_counter() - start) * 1000, 2),
            },
        )
    except MemlaneError as exc:
        embedder = ComponentOut(ok=False, detail={"error": str(exc)})
    ok = store.ok and embedder.ok and queue.ok
    health = HealthOut(status="ok" if ok else "unhealthy", store=store, embedder=embedder, queue=queue)
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
