"""A request id for every request: in the ``X-Request-ID`` response header, in every error body, and in
every server log line about the request, so that a client's report finds the server's detail.

A client (or a proxy in front) may send its own ``X-Request-ID``; it is kept when it is 1 to 64 letters,
digits or ``._:-`` (anything else could forge log lines), else a new one is made.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from memlane.interfaces.wire.asgi import HttpMiddleware

HEADER = b"x-request-id"
_ACCEPTED = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")


def new_request_id() -> str:
    return uuid.uuid4().hex


def request_id_of(scope: Scope | Any) -> str | None:
    """The id the middleware gave the request of ``scope`` (an ASGI scope, or anything with ``.scope``)."""
    raw = scope if isinstance(scope, dict) else getattr(scope, "scope", {})
    state = raw.get("state") or {}
    rid = state.get("request_id") if isinstance(state, dict) else None
    return rid if isinstance(rid, str) else None


class RequestIdMiddleware(HttpMiddleware):
    """Outermost of the app's middleware: picks the id, keeps it in ``scope["state"]`` (where
    ``request.state.request_id`` reads it) and adds the response header."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = dict(scope.get("headers", [])).get(HEADER)
        rid = given.decode("ascii") if given is not None and _ACCEPTED.match(given) else new_request_id()
        # The same dict the exception handlers see: they answer from outside this middleware.
        scope.setdefault("state", {})["request_id"] = rid

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == HEADER for name, _ in headers):
                    headers.append((HEADER, rid.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)
