"""Slow clients: a connection that sends its request a byte at a time is ended, not served forever.

uvicorn closes a connection idle between requests after ``timeout_keep_alive`` (5 s) and refuses headers
over h11's size limit, but it has no deadline for a request's headers to arrive, nor for its body. Without
one, each trickling client keeps a connection, its buffers and (once the body is being read) a task of
the app open for as long as it likes. Two deadlines, each ``read_timeout_s``:

* **headers**: from the moment a connection opens (or its previous response ends) until the request's
  headers are complete (:class:`GuardedH11Protocol`, a uvicorn protocol): then a 408 and the connection
  is closed;
* **body**: from the moment the app gets the request until the last byte of its body
  (:class:`ReadTimeoutMiddleware`): then a 408 with ``Connection: close``, and the app sees the client
  as gone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import anyio
import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from memlane.interfaces.wire.asgi import HttpMiddleware
from memlane.interfaces.wire.errors import error_body
from memlane.interfaces.wire.requestid import request_id_of

log = logging.getLogger("memlane.http")


def timeout_message(seconds: float, what: str) -> str:
    return f"the request's {what} did not arrive within {seconds:g} s"


def timeout_response(
    seconds: float, what: str, request_id: str | None = None
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body of a 408."""
    body = json.dumps(error_body("request_timeout", timeout_message(seconds, what), request_id=request_id)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    return headers, body


class ReadTimeoutMiddleware(HttpMiddleware):
    """Bounds the time to receive a request's whole body; later ``receive`` calls (waiting for the client
    to disconnect while a response streams) are not bounded."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        super().__init__(app)
        self.timeout_s = timeout_s

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        deadline = time.monotonic() + self.timeout_s
        body_done = False
        timed_out = False
        started = False

        async def guarded_receive() -> Message:
            nonlocal body_done, timed_out
            if body_done:
                return await receive()
            if timed_out:
                return {"type": "http.disconnect"}
            try:
                with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                    message = await receive()
            except TimeoutError:
                timed_out = True
                await self._answer_408(scope, send, started)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the 408 was the answer
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except Exception:
            if not timed_out:
                raise
            # The app gave up on a body that never came: nothing to report beyond the 408.
            log.debug("request %s: app stopped after the body timeout", request_id_of(scope), exc_info=True)

    async def _answer_408(self, scope: Scope, send: Send, started: bool) -> None:
        rid = request_id_of(scope)
        log.warning("request %s: body not received within %g s: 408", rid, self.timeout_s)
        if started:
            return
        headers, body = timeout_response(self.timeout_s, "body", rid)
        await send({"type": "http.response.start", "status": 408, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (``header_timeout_s``; set by
    :func:`guarded_protocol`)."""

    header_timeout_s: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        # IDLE: no complete request line and headers since the connection opened or the last response.
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if not self._has_partial_data():
            # Nothing sent at all: closed without an answer, as uvicorn closes an idle keep-alive connection.
            self.transport.close()
            return
        log.warning("connection %s: request headers not received within %g s: 408", self.client, self.header_timeout_s)
        headers, body = timeout_response(self.header_timeout_s, "headers")
        head = b"HTTP/1.1 408 Request Timeout\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
        self.transport.write(head + body)
        self.transport.close()

    def _has_partial_data(self) -> bool:
        # h11 keeps the bytes of an incomplete request in its receive buffer.
        return bool(getattr(self.conn, "trailing_data", (b"", False))[0])


def guarded_protocol(header_timeout_s: float) -> type[GuardedH11Protocol]:
    """The protocol class to give uvicorn (``Config(http=...)``), with this header deadline."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"header_timeout_s": header_timeout_s})
