"""Composition: the one place that starts the network servers for the CLI.

``memlane serve`` and ``memlane mcp`` are CLI commands, but the CLI never imports the HTTP service or the
MCP server (the independence contract in ``pyproject.toml``): it calls the functions here, which import
them on first use so that other commands do not load the web stack. This module imports the servers and
nothing imports it but the CLI's service commands.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from memlane.core.apikeys import ApiKeys
from memlane.core.memory import Memory
from memlane.settings import DEFAULT_AGENT_SYNC_TIMEOUT_S


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
    oidc: OidcOptions | None = None
    agent_sync_timeout_s: float = DEFAULT_AGENT_SYNC_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class OidcOptions:
    """OpenID Connect bearer tokens (``memlane.interfaces.http.oidc``): the key set file, what tokens must
    name (empty: not checked), and the claims that name the user and the role."""

    jwks_file: Path
    issuer: str = ""
    audience: str = ""
    user_claim: str = "sub"
    role_claim: str = "role"


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
    from memlane.interfaces.http.oidc import OidcSettings
    from memlane.interfaces.http.server import ServeOptions, serve
    from memlane.interfaces.http.settings import HttpSettings

    o = service.oidc
    oidc = None
    if o is not None:
        oidc = OidcSettings(o.jwks_file, o.issuer or None, o.audience or None, o.user_claim, o.role_claim)

    serve(
        memory,
        admin_key=admin_key,
        insecure_dev=insecure_dev,
        options=ServeOptions(
            host=service.host,
            port=service.port,
            workers=service.workers,
            retention_every_s=service.retention_every_s,
            log_level=service.log_level,
            access_log=service.access_log,
        ),
        settings=HttpSettings(
            max_body_bytes=service.max_body_bytes,
            allowed_hosts=service.allowed_hosts,
            read_timeout_s=service.read_timeout_s,
            health_check_every_s=service.health_check_every_s,
            agent_memory_api=service.agent_memory_api,
            oidc=oidc,
            agent_sync_timeout_s=service.agent_sync_timeout_s,
        ),
    )


def run_mcp_stdio(memory: Memory, user: str) -> None:
    """The MCP server on stdin/stdout, its tools acting for ``user``."""
    from memlane.interfaces.mcp.server import build_server

    build_server(memory, user=user).run("stdio")


def run_mcp_http(memory: Memory, keys: ApiKeys, service: McpHttpService) -> None:
    """The MCP server's streamable HTTP transport, each request acting for its API key's user."""
    from memlane.interfaces.mcp.server import serve_http

    serve_http(memory, keys, **dataclasses.asdict(service))
