"""Serving the console's files at ``/ui``, with the headers that keep its pages to their own assets."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from memlane.interfaces.http.apidocs import DOCS_CONTENT_SECURITY_POLICY, DOCS_PATH
from memlane.interfaces.http.csp import content_security_policy
from memlane.interfaces.wire.asgi import HttpMiddleware

CONSOLE_PATH = "/ui"
STATIC_DIR = Path(__file__).parent / "static"

# Only the console's own files: no inline script or style, no other origin, no framing, no plugins. Memory
# text is put in the page as text (textContent), so a stored "<script>" is characters; this policy is the
# second wall should a page ever insert markup.
CONTENT_SECURITY_POLICY = content_security_policy()
# What every answer of the service carries, the API's JSON and the console's files alike.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)
CONSOLE_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    # The files change with the installed version; revalidating keeps a console in step with its API.
    ("Cache-Control", "no-cache"),
)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class SecurityHeadersMiddleware(HttpMiddleware):
    """Adds :data:`SECURITY_HEADERS` to every response, the console's CSP to those under ``/ui``, and the API
    docs' CSP to those under ``/docs``."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        extra = SECURITY_HEADERS
        if _under(path, CONSOLE_PATH):
            extra += CONSOLE_HEADERS
        elif _under(path, DOCS_PATH):
            extra += (("Content-Security-Policy", DOCS_CONTENT_SECURITY_POLICY),)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in extra:
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def mount_console(app: FastAPI) -> None:
    """Serve the console at ``/ui/`` (``/ui`` and the server's root ``/`` redirect there). The app adds
    :class:`SecurityHeadersMiddleware` outermost, so its 4xx answers from the guards carry the headers too."""

    @app.get(CONSOLE_PATH, include_in_schema=False)
    def console_root() -> RedirectResponse:
        return RedirectResponse(CONSOLE_PATH + "/", status_code=308)

    # A person who opens the server's address in a browser gets the console, not a 404. Temporary (307):
    # the root is not the console's for good.
    @app.get("/", include_in_schema=False)
    def server_root() -> RedirectResponse:
        return RedirectResponse(CONSOLE_PATH + "/", status_code=307)

    app.mount(CONSOLE_PATH, StaticFiles(directory=STATIC_DIR, html=True), name="console")
