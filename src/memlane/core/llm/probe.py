"""Is the LLM server there? One cheap request (``GET {base}/models``, which every OpenAI-compatible server
answers without running the model), with a short timeout and no retry: never a completion, so probing costs
nothing however often an operator asks.

A provider offers :meth:`Probeable.probe`; the OpenAI-compatible client (its request is made in
:meth:`memlane.core.llm.openai_http.ChatEndpoint.probe`) and the scripted fake do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

MODELS_PATH = "models"
DEFAULT_PROBE_TIMEOUT_S = 3.0

# What went wrong, in words a dashboard can key on.
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"  # refused, reset, no route, unknown host
RATE_LIMITED = "rate_limited"  # 429
REFUSED = "refused"  # 401, 403, 407: the key is wrong or not allowed
HTTP_ERROR = "http_error"  # any other non-2xx status
BAD_REPLY = "bad_reply"  # a 2xx that is not the JSON list of models


@dataclass(frozen=True, slots=True)
class LLMProbe:
    """One probe's outcome. ``error_kind`` is None when ``ok``; ``status`` the HTTP status if one came back;
    ``model_listed`` whether the server's list of models names the configured model (None: it sent no list,
    or the probe failed); ``detail`` says what happened (it may name the server's address: an operator's
    text)."""

    ok: bool
    error_kind: str | None
    latency_ms: float
    status: int | None = None
    model_listed: bool | None = None
    detail: str = ""


@runtime_checkable
class Probeable(Protocol):
    def probe(self, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> LLMProbe:
        """Ask the server whether it is there, within ``timeout_s``; never raises for a server's failure."""
        ...
