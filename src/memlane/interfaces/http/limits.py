"""Request size limit: 413 before a large body is read, whether its length is declared or not."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.interfaces.http.errors import error_body
from memlane.interfaces.wire.asgi import HttpMiddleware
from memlane.interfaces.wire.requestid import request_id_of


class BodyLimitMiddleware(HttpMiddleware):
    """Refuses bodies over ``max_bytes``: at once when ``Content-Length`` says so, else while reading.

    A chunked body that grows past the limit raises a 413 HTTPException out of ``receive``; the app's
    exception handling turns it into the usual error body, so the route never sees a partial body.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, request_id_of(scope))
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, limited_receive, send)

    def _message(self) -> str:
        return f"request body over the limit of {self.max_bytes} bytes"

    async def _refuse(self, send: Send, request_id: str | None) -> None:
        # The same body as every other error, request id included (the header is added on the way out).
        body = json.dumps(error_body("payload_too_large", self._message(), request_id=request_id)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        # "close": the client may still be sending the body we will not read.
        headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
