"""The HTTP service: a FastAPI app over the core, with API keys scoped to one user each.

See ``docs/http.md`` for the routes, auth and error shapes; :func:`create_app` builds the app. The names
below load on first use, so the CLI can read :mod:`.settings` without importing the web stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.interfaces.http.app import create_app
    from memlane.interfaces.http.settings import HttpSettings

__all__ = ["HttpSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from memlane.interfaces.http.app import create_app

        return create_app
    if name == "HttpSettings":
        from memlane.interfaces.http.settings import HttpSettings

        return HttpSettings
    raise AttributeError(name)
