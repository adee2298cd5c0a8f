"""Composition: the one place that starts the network servers for the CLI.

``memlane serve`` and ``memlane mcp`` are CLI commands, but the CLI never imports the HTTP service or the
MCP server (the independence contract in ``pyproject.toml``): it calls the functions here, which import
them on first use so that other commands do not load the web stack. This module imports the servers and
nothing imports it but the CLI's service commands.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from memlane.core.apikeys import ApiKeys
from memlane.core.memory import Memory
from memlane.interfaces.wire.oidc import OidcSettings
from memlane.settings import DEFAULT_AGENT_SYNC_TIMEOUT_S

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Options = TypeVar("_Options", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class HttpService:
    """How ``memlane serve`` listens, guards its requests and how much extraction it runs alongside."""

    host: str
    port: int
    workers: int
    log_level: str
    access_log: bool
    max_body_bytes: int
    allowed_hosts: tuple[str, ...]
    read_timeout_s: float
    retention_every_s: float
    health_check_every_s: float = 3600.0
    agent_memory_api: bool = True
    oidc: OidcSettings | None = None
    agent_sync_timeout_s: float = DEFAULT_AGENT_SYNC_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class McpHttpService:
    """Where ``memlane mcp --transport http`` listens, and its guards (those of the HTTP service)."""

    host: str
    port: int
    log_level: str
    allowed_hosts: tuple[str, ...]
    read_timeout_s: float


def check_admin_key(admin_key: str | None, *, insecure_dev: bool, host: str) -> str | None:
    """The admin key the HTTP service will use (see :func:`memlane.interfaces.http.server.check_admin_key`)."""
    from memlane.interfaces.http.server import check_admin_key as check

    return check(admin_key, insecure_dev=insecure_dev, host=host)


def run_http(memory: Memory, service: HttpService, *, admin_key: str | None, insecure_dev: bool) -> None:
    """Serve the HTTP API (and its extraction workers) until SIGTERM or Ctrl-C."""
    from memlane.interfaces.http.server import ServeOptions, serve
    from memlane.interfaces.http.settings import HttpSettings

    options, settings = _same_named(ServeOptions, service), _same_named(HttpSettings, service)
    serve(memory, admin_key=admin_key, insecure_dev=insecure_dev, options=options, settings=settings)


def _same_named(cls: type[_Options], service: HttpService) -> _Options:
    """``cls`` holding the fields of ``service`` it has a field of the same name for (its others at their
    defaults): each of the service's options goes where the HTTP service reads it, under its own name."""
    names = {f.name for f in dataclasses.fields(cls)}
    given: dict[str, Any] = {f.name: getattr(service, f.name) for f in dataclasses.fields(service) if f.name in names}
    return cls(**given)


def run_mcp_stdio(memory: Memory, user: str) -> None:
    """The MCP server on stdin/stdout, its tools acting for ``user``."""
    from memlane.interfaces.mcp.server import build_server

    build_server(memory, user=user).run("stdio")


def run_mcp_http(memory: Memory, keys: ApiKeys, service: McpHttpService) -> None:
    """The MCP server's streamable HTTP transport, each request acting for its API key's user."""
    from memlane.interfaces.mcp.server import serve_http

    serve_http(memory, keys, **dataclasses.asdict(service))
