"""The Agent Memory API at the root of ``memlane serve``, beside ``/v1``: the 30 routes of that API's
clients (users, sessions, memory, prompts, health), each a thin mapping onto the core, with that API's
flat error envelope. See ``docs/integrations/agent-memory.md``."""

from __future__ import annotations

from fastapi import FastAPI

from memlane.interfaces.http.agent_memory import health, memory, prompts, sessions, users
from memlane.interfaces.http.agent_memory.errors import FlatErrorMiddleware, no_route, serves

__all__ = ["PUBLIC_PATHS", "FlatErrorMiddleware", "include", "no_route", "serves"]

# Answered without a key, and whatever the Host header says (like /healthz): a client's liveness probe.
PUBLIC_PATHS = frozenset({"/health"})


def include(app: FastAPI) -> None:
    """Add the routes to ``app`` (the caller adds :class:`FlatErrorMiddleware` among its middleware)."""
    for module in (health, users, sessions, memory, prompts):
        app.include_router(module.router)
