"""The LLM's health: whether this server has one, which model, whether queued extractions wait for it, and on
the admin's request a probe of its server (one ``GET {base}/models``, never a completion).

The service works without its LLM (adds and searches do not need it; extraction waits), so none of this
makes ``/healthz`` unhealthy. A user's key is told whether extraction works, never where the LLM is: no
address, in the endpoint or in an error's text; the probe, which names the server, takes the admin key.
"""

from __future__ import annotations

import time
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from memlane.core.jobs import LLMOutage
from memlane.core.llm import OpenAIChatClient
from memlane.core.llm.probe import DEFAULT_PROBE_TIMEOUT_S, Probeable
from memlane.core.memory import Memory
from memlane.interfaces.http.auth import Caller
from memlane.interfaces.http.errors import AuthError
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.errors import scrub_addresses
from memlane.interfaces.wire.schemas import ComponentOut, LLMOutageOut, error_responses

router = APIRouter(prefix="/v1", tags=["operations"], responses=error_responses(401, 403, 422))


class LLMProbeOut(BaseModel):
    """One probe of the LLM's server."""

    ok: bool
    error_kind: str | None = Field(
        description="null when ok; else timeout, unreachable, rate_limited (429), refused (401/403: the key), "
        "http_error (another status), bad_reply, or not_probeable (a provider without a probe)."
    )
    latency_ms: float
    status: int | None = Field(description="The HTTP status the server answered, if it answered.")
    model_listed: bool | None = Field(
        description="Whether the server's list of models names the configured one (null: no list)."
    )
    detail: str


class LLMHealthOut(BaseModel):
    """The LLM of this server process, and the queue's view of it."""

    configured: bool = Field(description="Whether this server process has an LLM (memlane serve --workers 0 has none).")
    provider: str | None = Field(description="openai, scripted, or another registered provider; null without one.")
    model: str | None
    endpoint: str | None = Field(
        description="The server's base URL without credentials or query: the admin's key only (null otherwise)."
    )
    outage: LLMOutageOut | None = Field(
        description="Queued extractions waiting for an LLM that could not be reached (any process's), or null."
    )
    probe: LLMProbeOut | None = Field(description="The probe's outcome with ?probe=true (admin key); else null.")


def _endpoint(memory: Memory) -> str | None:
    if not isinstance(memory.llm, OpenAIChatClient):
        return None
    parts = urlsplit(memory.llm.settings.base_url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def outage_out(outage: LLMOutage | None, *, scrub: bool) -> LLMOutageOut | None:
    """The outage as ``/v1/queue`` says it; ``scrub``: without the addresses its error names."""
    if outage is None:
        return None
    error = scrub_addresses(outage.last_error) if scrub else outage.last_error
    waiting = max(0.0, time.time() - outage.since)
    return LLMOutageOut(
        jobs=outage.jobs, since=outage.since, waiting_s=waiting, next_try_in_s=outage.next_try_in_s, last_error=error
    )


@router.get("/llm", response_model=LLMHealthOut, responses=error_responses(503))
def llm_health(
    caller: Caller,
    request: Request,
    probe: Annotated[bool, Query(description="Ask the LLM's server now (GET {base}/models). Admin key.")] = False,
    timeout_s: Annotated[float, Query(gt=0, le=30, description="How long the probe waits.")] = DEFAULT_PROBE_TIMEOUT_S,
) -> LLMHealthOut:
    """Whether this server has an LLM, its model, the queue's LLM outage (if extraction is waiting for it),
    and with ``probe=true`` (admin key) whether its server answers now: one ``GET {base}/models`` within
    ``timeout_s``, never a completion. Any key; a user's key sees no address. The LLM being down never makes
    ``/healthz`` unhealthy: extraction waits for it, everything else works."""
    admin = caller.user is None
    if probe and not admin:
        raise AuthError(403, "probing the LLM's server takes the admin key")
    memory = services(request).memory
    llm = memory.llm
    probed = None
    if probe and llm is not None:
        if isinstance(llm, Probeable):
            probed = LLMProbeOut.model_validate(llm.probe(timeout_s), from_attributes=True)
        else:
            probed = LLMProbeOut(
                ok=False,
                error_kind="not_probeable",
                latency_ms=0.0,
                status=None,
                model_listed=None,
                detail=f"the {llm.name!r} provider offers no probe",
            )
    outage = memory.queue_status(recent_errors=0).llm_outage
    return LLMHealthOut(
        configured=llm is not None,
        provider=None if llm is None else llm.name,
        model=None if llm is None else llm.model,
        endpoint=_endpoint(memory) if admin else None,
        outage=outage_out(outage, scrub=not admin),
        probe=probed,
    )


def llm_component(memory: Memory, waiting_jobs: int) -> ComponentOut:
    """``/healthz``'s line for the LLM: information, never a failure of the service (extraction waits).
    ``waiting_jobs``: the queued jobs waiting for an LLM that could not be reached (the queue's line)."""
    detail: dict[str, object] = {
        "configured": memory.llm is not None,
        "model": None if memory.llm is None else memory.llm.model,
        "waiting_jobs": waiting_jobs,
    }
    return ComponentOut(ok=waiting_jobs == 0, detail=detail)
