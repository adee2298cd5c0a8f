"""Every ASGI middleware of the HTTP service passes what is not an HTTP request (the server's lifespan
events) to the app it wraps untouched, and sees the HTTP requests itself."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.interfaces.http.console.mount import SecurityHeadersMiddleware
from memlane.interfaces.http.limits import BodyLimitMiddleware
from memlane.interfaces.http.metrics import Metrics, MetricsMiddleware
from memlane.interfaces.wire.requestid import RequestIdMiddleware, request_id_of
from memlane.interfaces.wire.slow import ReadTimeoutMiddleware

IDLE_QUEUE: Any = SimpleNamespace(queued=0, running=0, done=0, dead=0, oldest_queued_age_s=None)
WRAPPERS: dict[str, Any] = {
    "security headers": SecurityHeadersMiddleware,
    "body limit": lambda app: BodyLimitMiddleware(app, max_bytes=10),
    "metrics": lambda app: MetricsMiddleware(app, Metrics(lambda: IDLE_QUEUE)),
    "request id": RequestIdMiddleware,
    "read timeout": lambda app: ReadTimeoutMiddleware(app, timeout_s=5.0),
}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Scope, Receive, Send]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls.append((scope, receive, send))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=WRAPPERS.keys())
def test_lifespan_goes_to_the_app_untouched(wrap: Any) -> None:
    inner = Recorder()
    middleware: ASGIApp = wrap(inner)
    scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(middleware(scope, _receive, send))
    assert inner.calls == [(scope, _receive, send)]
    assert sent == []


def test_an_http_request_is_seen_by_the_middleware() -> None:
    inner = Recorder()
    scope: Scope = {"type": "http", "method": "GET", "path": "/v1/x", "headers": []}
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(RequestIdMiddleware(inner)(scope, _receive, send))
    assert request_id_of(inner.calls[0][0]) is not None
    assert (b"x-request-id", request_id_of(inner.calls[0][0]).encode()) in sent[0]["headers"]
