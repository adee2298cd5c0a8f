"""Every request body of the API is JSON, whatever content type the client declared.

``curl -d '{...}'`` declares ``application/x-www-form-urlencoded`` and some clients send ``text/plain``;
FastAPI would then hand the route the raw bytes and answer 422 "Input should be a valid dictionary". The
API has no form routes, so such bodies are read as JSON; one that does not parse gets 400 saying so.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

_READ_AS_JSON = frozenset({b"application/x-www-form-urlencoded", b"text/plain"})
_JSON = b"application/json"


class JsonBodyMiddleware:
    """Relabels form-encoded and plain-text request bodies as JSON before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers", [])
            declared = next((v for k, v in headers if k == b"content-type"), None)
            if declared is not None and declared.split(b";")[0].strip().lower() in _READ_AS_JSON:
                kept = [(k, v) for k, v in headers if k != b"content-type"]
                scope = {**scope, "headers": [*kept, (b"content-type", _JSON)]}
        await self.app(scope, receive, send)
