"""Settings of the HTTP service, built once at the edge (the defaults are those of :mod:`memlane.settings`)."""

from __future__ import annotations

from dataclasses import dataclass

from memlane.interfaces.wire.hosts import LOOPBACK_HOSTS
from memlane.interfaces.wire.oidc import OidcSettings
from memlane.settings import (
    DEFAULT_AGENT_SYNC_TIMEOUT_S,
    DEFAULT_HEALTH_CHECK_EVERY_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_READ_TIMEOUT_S,
)

DEFAULT_HEALTH_WRITE_TIMEOUT_S = 5.0
# The Agent Memory routes' limits (that API's own defaults): a block's estimated tokens, and the blocks an
# add may find waiting for extraction before it is refused with 429.
DEFAULT_AGENT_BLOCK_TOKENS = 4096
DEFAULT_AGENT_QUEUE_MAX = 10_000
__all__ = [
    "DEFAULT_AGENT_SYNC_TIMEOUT_S",
    "DEFAULT_HEALTH_CHECK_EVERY_S",
    "DEFAULT_HEALTH_WRITE_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_READ_TIMEOUT_S",
    "LOOPBACK_HOSTS",
    "HttpSettings",
]


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """``max_body_bytes``: larger request bodies are refused with 413 before they are read.
    ``allowed_hosts``: the ``Host`` names requests may carry (421 otherwise; ``"*"`` allows any).
    ``read_timeout_s``: a client gets this long to send a request's headers, and again to send its body
    (408 and a closed connection after). ``health_write_timeout_s``: how long ``/healthz`` waits for the
    store's write lock. ``health_check_every_s``: how often the store's quick integrity check runs (from
    the service's start; 0: never), whose result ``/healthz`` reports. ``agent_memory_api``: serve the
    Agent Memory routes at the root (``docs/integrations/agent-memory.md``); ``agent_block_tokens`` and
    ``agent_queue_max``: their per-block token limit and extraction queue capacity;
    ``agent_sync_timeout_s``: how long an add with ``async_processing: false`` waits for its extraction,
    the LLM client's retries included, before it answers 502. ``oidc``: accept OpenID Connect bearer tokens
    too (:mod:`memlane.interfaces.http.oidc`)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    health_write_timeout_s: float = DEFAULT_HEALTH_WRITE_TIMEOUT_S
    health_check_every_s: float = DEFAULT_HEALTH_CHECK_EVERY_S
    agent_memory_api: bool = True
    oidc: OidcSettings | None = None
    agent_block_tokens: int = DEFAULT_AGENT_BLOCK_TOKENS
    agent_queue_max: int = DEFAULT_AGENT_QUEUE_MAX
    agent_sync_timeout_s: float = DEFAULT_AGENT_SYNC_TIMEOUT_S
