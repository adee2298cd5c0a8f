"""Which ``Host`` names the service answers: the defence against DNS rebinding.

A web page on any site can make the browser send requests to a name its own DNS points at 127.0.0.1 (or
at a machine of the visitor's network); the browser then treats the memlane service as the page's own
origin. What gives it away is the ``Host`` header, which carries the page's name. So the service answers
only the names it is configured with (421 Misdirected Request otherwise):

* always the loopback names ``localhost``, ``127.0.0.1`` and ``[::1]``;
* the address it listens on, when that is one address (``--host 10.0.0.5``), not a wildcard (``0.0.0.0``);
* the names given with ``--allowed-hosts`` / ``MEMLANE_ALLOWED_HOSTS`` (comma-separated), or ``*`` for
  any name (when a proxy in front checks it).

The port is not compared. ``/healthz`` is exempt: it shows no user data, and orchestrators probe it by the
machine's address.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from memlane.core.errors import ValidationError
from memlane.interfaces.wire.errors import error_body
from memlane.interfaces.wire.requestid import request_id_of

ANY_HOST = "*"
# The names a browser sends for a server on this machine; a page can only send them from this machine.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
EXEMPT_PATHS = frozenset({"/healthz"})


def normalize_host(entry: str) -> str:
    """A name as compared: lower case, no trailing dot, no port, an IPv6 address in brackets."""
    name = entry.strip().lower()
    if name in (ANY_HOST, ""):
        return name
    if name.startswith("["):
        return name[: name.find("]") + 1] if "]" in name else name
    try:
        return f"[{ipaddress.IPv6Address(name)}]"
    except ValueError:
        pass
    if name.count(":") == 1:
        name = name.split(":", 1)[0]
    return name.rstrip(".")


def allowed_hosts(configured: Iterable[str], bind_host: str | None = None) -> tuple[str, ...]:
    """The allowlist: the loopback names, the listening address if it is a single one, and ``configured``
    (each a name or ``*``). A malformed entry is a ValidationError naming the option."""
    out = list(LOOPBACK_HOSTS)
    if bind_host and bind_host not in ("0.0.0.0", "::", "[::]", ""):
        out.append(normalize_host(bind_host))
    for raw in configured:
        name = normalize_host(raw)
        if not name:
            continue
        if name != ANY_HOST and not all(c.isascii() and (c.isalnum() or c in ".-[]:_") for c in name):
            raise ValidationError(f"{raw!r} is not a host name (or '*' for any)", where="--allowed-hosts")
        out.append(name)
    return tuple(dict.fromkeys(out))


def host_allowed(header: str | None, allowed: Iterable[str]) -> bool:
    allowed = tuple(allowed)
    if ANY_HOST in allowed:
        return True
    if not header:
        return False
    return normalize_host(header) in allowed


class HostCheckMiddleware:
    """421 with the usual error body for a request whose ``Host`` is not allowed."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str], exempt: frozenset[str] = EXEMPT_PATHS) -> None:
        self.app = app
        self.allowed = tuple(allowed)
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.exempt:
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers", [])).get(b"host")
        host = raw.decode("latin-1") if raw is not None else None
        if host_allowed(host, self.allowed):
            await self.app(scope, receive, send)
            return
        message = (
            "no Host header" if host is None else f"this server does not answer to the host name {host[:100]!r}"
        ) + "; its operator can allow a name with --allowed-hosts (MEMLANE_ALLOWED_HOSTS)"
        body = error_body("misdirected_request", message, request_id=request_id_of(scope))
        payload = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 421, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
