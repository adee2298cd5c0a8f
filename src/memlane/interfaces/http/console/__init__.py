"""The memory console: a browser client of the /v1 API, served at ``/ui`` on the API's own port.

The console is static files (``static/``: one HTML page, ES modules, a style sheet), shipped as package data
and served as they are: no build step, no CDN, nothing fetched at run time. It holds no server logic of its
own: every figure it shows is an answer of /v1 to the key the person signed in with, so what a key may see
is decided by the API's routes, never by the page (docs/console.md).
"""

from __future__ import annotations

from memlane.interfaces.http.console.mount import CONSOLE_PATH, STATIC_DIR, SecurityHeadersMiddleware, mount_console

__all__ = ["CONSOLE_PATH", "STATIC_DIR", "SecurityHeadersMiddleware", "mount_console"]
