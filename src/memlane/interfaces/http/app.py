"""The FastAPI app factory: the HTTP service over one :class:`~memlane.core.memory.Memory`.

>>> app = create_app(Memory.open("memlane.db"), admin_key=memlane.settings.load().secret("admin_key"))  # doctest: +SKIP

The app is a thin adapter: auth, request validation, the error table of :mod:`.errors`, serialization.
Routes are plain ``def`` functions, so FastAPI runs the (synchronous, thread-safe) core in its threadpool
and the event loop never blocks on SQLite or the embedder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI

from memlane.core.apikeys import ApiKeys
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.memory import Memory
from memlane.interfaces.http import agent_memory
from memlane.interfaces.http.apidocs import mount_api_docs
from memlane.interfaces.http.console import SecurityHeadersMiddleware, mount_console
from memlane.interfaces.http.errors import install_error_handlers
from memlane.interfaces.http.integrity import IntegrityWatch
from memlane.interfaces.http.json_body import JsonBodyMiddleware
from memlane.interfaces.http.limits import BodyLimitMiddleware
from memlane.interfaces.http.metrics import Metrics, MetricsMiddleware
from memlane.interfaces.http.oidc import OidcVerifier
from memlane.interfaces.http.routes import browse, llm, memories, ops, prompts, retention, sessions, users
from memlane.interfaces.http.services import Services
from memlane.interfaces.http.settings import HttpSettings
from memlane.interfaces.wire.hosts import EXEMPT_PATHS, HostCheckMiddleware
from memlane.interfaces.wire.requestid import RequestIdMiddleware
from memlane.interfaces.wire.slow import ReadTimeoutMiddleware

API_VERSION = "1"
ADMIN_KEY_ENV = "MEMLANE_ADMIN_KEY"
MIN_ADMIN_KEY_CHARS = 16


def create_app(
    memory: Memory,
    *,
    admin_key: str | None,
    insecure_dev: bool = False,
    settings: HttpSettings | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The HTTP API over ``memory``.

    ``admin_key`` manages users and keys; ``None`` is allowed only with ``insecure_dev`` (admin routes then
    need no key; the caller checks that the server listens on loopback only). The API keys are the store's
    own (:class:`~memlane.core.apikeys.ApiKeys`). ``on_shutdown`` runs when the server stops (``memlane serve`` stops
    its extraction workers there). The app does not close ``memory``: its owner does.
    """
    if admin_key is None and not insecure_dev:
        raise ConfigError("the HTTP service needs an admin key (MEMLANE_ADMIN_KEY), or insecure dev mode")
    if admin_key is not None:
        admin_key = usable_admin_key(admin_key)
    settings = settings or HttpSettings()
    metrics = Metrics(lambda: memory.queue_status(recent_errors=0))
    svc = Services(
        memory=memory,
        keys=ApiKeys(memory.store),
        admin_key=admin_key,
        metrics=metrics,
        settings=settings,
        integrity=IntegrityWatch(lambda: memory.store.check(quick=True), settings.health_check_every_s),
        oidc=OidcVerifier(settings.oidc) if settings.oidc is not None else None,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        svc.integrity.start()
        try:
            yield
        finally:
            svc.integrity.stop()
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPI(
        title="memlane",
        version=API_VERSION,
        summary="Persistent per-user memory for LLM agents.",
        description="Keys travel as `Authorization: Bearer <key>`. See docs/http.md.",
        lifespan=lifespan,
        # FastAPI's pages load Swagger UI and ReDoc from a CDN: /docs is served from the package instead.
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = svc
    install_error_handlers(app, partial(agent_memory.no_route, api_on=settings.agent_memory_api))
    app.include_router(ops.router)
    app.include_router(users.router)
    app.include_router(memories.router)
    app.include_router(sessions.router)
    app.include_router(prompts.router)
    app.include_router(retention.router)
    app.include_router(browse.router)
    app.include_router(llm.router)
    mount_console(app)
    mount_api_docs(app)
    exempt = EXEMPT_PATHS
    if settings.agent_memory_api:
        agent_memory.include(app)
        exempt = exempt | agent_memory.PUBLIC_PATHS
    app.add_middleware(JsonBodyMiddleware)
    # Added last = outermost. The security headers first and the request id next, so every answer carries
    # them; the metrics next, so they count every response, the 421s, 408s and 413s of the guards included.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(ReadTimeoutMiddleware, timeout_s=settings.read_timeout_s)
    app.add_middleware(HostCheckMiddleware, allowed=settings.allowed_hosts, exempt=exempt)
    if settings.agent_memory_api:
        # Outside the guards above, so what they refuse on the Agent Memory paths has that API's error body.
        app.add_middleware(agent_memory.FlatErrorMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(SecurityHeadersMiddleware)
    return app


def usable_admin_key(admin_key: str) -> str:
    """The admin key without surrounding whitespace (a bearer token is read trimmed, so a key with it
    could never be used), or a ValidationError naming MEMLANE_ADMIN_KEY when it is too short or holds
    characters an Authorization header cannot carry."""
    key = admin_key.strip()
    if not key:
        raise ValidationError("empty (or only whitespace); it must be at least 16 characters", where=ADMIN_KEY_ENV)
    if len(key) < MIN_ADMIN_KEY_CHARS:
        raise ValidationError(
            f"{len(key)} characters after trimming; it must be at least {MIN_ADMIN_KEY_CHARS}", where=ADMIN_KEY_ENV
        )
    if not all(" " <= c <= "~" for c in key):
        raise ValidationError("only printable ASCII characters can travel in an HTTP header", where=ADMIN_KEY_ENV)
    return key
