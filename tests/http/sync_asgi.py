"""A synchronous httpx transport over an ASGI app: httpx's own ASGITransport is async only, and the
memlane client is sync. Requests run on an anyio blocking portal, in process, with no sockets."""

from __future__ import annotations

from contextlib import ExitStack

import anyio.from_thread
import httpx
from starlette.types import ASGIApp


class SyncASGITransport(httpx.BaseTransport):
    def __init__(self, app: ASGIApp) -> None:
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
        self._inner = httpx.ASGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()

        async def call() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            req = httpx.Request(request.method, request.url, headers=request.headers, content=body)
            resp = await self._inner.handle_async_request(req)
            content = await resp.aread()
            return resp.status_code, resp.headers.raw, content

        status, headers, content = self._portal.call(call)
        return httpx.Response(status, headers=headers, content=content, request=request)

    def close(self) -> None:
        """Clients close their transport; this one is shared by many and outlives them (see shutdown)."""

    def shutdown(self) -> None:
        self._stack.close()
