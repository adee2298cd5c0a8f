"""Settings of the HTTP service, built once at the edge. No web framework is imported here, so the CLI can
read the defaults without loading one."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_READ_TIMEOUT_S = 30.0
DEFAULT_HEALTH_WRITE_TIMEOUT_S = 5.0
# The names a browser sends for a server on this machine; a page can only send them from this machine.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """``max_body_bytes``: larger request bodies are refused with 413 before they are read.
    ``allowed_hosts``: the ``Host`` names requests may carry (421 otherwise; ``"*"`` allows any).
    ``read_timeout_s``: a client gets this long to send a request's headers, and again to send its body
    (408 and a closed connection after). ``health_write_timeout_s``: how long ``/healthz`` waits for the
    store's write lock."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    health_write_timeout_s: float = DEFAULT_HEALTH_WRITE_TIMEOUT_S
