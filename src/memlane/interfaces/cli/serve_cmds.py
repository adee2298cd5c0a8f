"""Service commands: ``memlane serve`` (HTTP API + extraction workers) and ``memlane mcp`` (MCP server)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from memlane.core.apikeys import ApiKeys
from memlane.core.bounds import MAX_CONCURRENCY
from memlane.core.errors import ConfigError, NotFoundError, StoreError
from memlane.core.memory import Memory
from memlane.core.store.postgres import is_postgres_url
from memlane.interfaces.cli.app import (
    LLMChoice,
    llm_config_problem,
    llm_options,
    open_memory,
    store_options,
)
from memlane.interfaces.cli.options import (
    EVERY,
    PORT,
    SettingOption,
    cli_settings,
    log_level_option,
    retention_every_option,
    setting_option,
    timeout_option,
)
from memlane.interfaces.serve import (
    HttpService,
    McpHttpService,
    check_admin_key,
    run_http,
    run_mcp_http,
    run_mcp_stdio,
)
from memlane.interfaces.wire.oidc import OidcSettings
from memlane.settings import (
    DEFAULT_AGENT_SYNC_TIMEOUT_S,
    DEFAULT_HEALTH_CHECK_EVERY_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_READ_TIMEOUT_S,
    MAX_BODY_BYTES,
)

F = TypeVar("F", bound=Callable[..., Any])

# A request waits this long for a PostgreSQL connection, then gets 503: while the database is down, callers
# hear so within seconds instead of hanging (the pool keeps reconnecting in the background).
SERVICE_SERVER_TIMEOUT_S = 5.0
DEFAULT_KEYS_FILE = "memlane.keys.db"


def keys_option(func: F) -> F:
    """``--keys``: an earlier memlane's key file to import (shared by ``memlane serve`` and ``memlane mcp``)."""
    return setting_option(
        "--keys",
        "keys_path",
        setting="http_keys",
        default=None,
        type=click.Path(dir_okay=False, path_type=Path),
        help="API keys live in the store. This imports, once, the key file an earlier memlane kept apart "
        f"(by default {DEFAULT_KEYS_FILE} beside a PostgreSQL store), then renames it FILE.imported.",
    )(func)


def guard_options(func: F) -> F:
    """``--allowed-hosts`` and ``--read-timeout`` (shared by ``memlane serve`` and ``memlane mcp``)."""
    func = timeout_option(
        "--read-timeout",
        setting="http_read_timeout",
        default=DEFAULT_READ_TIMEOUT_S,
        help="Seconds a client has to send a request's headers, and again its body; then 408 and the "
        "connection is closed.",
    )(func)
    func = setting_option(
        "--allowed-hosts",
        setting="allowed_hosts",
        default="",
        help="Host names requests may carry besides localhost, 127.0.0.1, [::1] and the --host address "
        "(comma-separated; '*' for any): others get 421, against DNS rebinding.",
    )(func)
    return func


def oidc_options(func: F) -> F:
    """``--oidc-*``: OpenID Connect bearer tokens besides memlane's keys."""
    for name, setting, default, text in reversed(
        [
            ("--oidc-issuer", "oidc_issuer", "", "The issuer tokens must name (empty: any)."),
            ("--oidc-audience", "oidc_audience", "", "The audience tokens must name (empty: not checked)."),
            ("--oidc-user-claim", "oidc_user_claim", "sub", "The claim naming the memlane user."),
            ("--oidc-role-claim", "oidc_role_claim", "role", "The claim naming the role (read-only/ams_ro, "
             "read-write/ams_rw, admin/ams_admin; none: read-only). An admin token acts on any user of the "
             "Agent Memory routes."),
        ]
    ):  # fmt: skip
        env = "MEMLANE_" + setting.upper()
        func = click.option(name, setting, cls=SettingOption, setting=setting, default=default,
                            show_default=bool(default), help=f"{text} [env {env}]")(func)  # fmt: skip
    return setting_option(
        "--oidc-jwks",
        "oidc_jwks",
        setting="oidc_jwks",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="A JWKS file (the identity provider's public keys): RS256 OpenID Connect bearer tokens verified "
        "against it act as their user's key, with their role; needs memlane[oidc].",
    )(func)


def oidc_choice(jwks: Path | None, issuer: str, audience: str, user_claim: str, role_claim: str) -> OidcSettings | None:
    return None if jwks is None else OidcSettings(jwks, issuer or None, audience or None, user_claim, role_claim)


def host_list(option: str, host: str) -> tuple[str, ...]:
    from memlane.interfaces.wire.hosts import allowed_hosts  # starlette: loaded by the servers only

    return allowed_hosts([h for h in option.split(",") if h.strip()], host)


def import_key_file(mem: Memory, store: str, explicit: Path | None) -> None:
    """Move the keys of an earlier memlane's separate key file into the store, once. A SQLite store's own
    key table moved by its migration; a PostgreSQL store's keys were in ``memlane.keys.db`` unless
    ``--keys`` named another file. The file is renamed afterwards, so a key revoked later is not
    imported again at the next start."""
    path = explicit if explicit is not None else Path(DEFAULT_KEYS_FILE) if is_postgres_url(store) else None
    if path is None or (not is_postgres_url(store) and path.resolve() == Path(store).resolve()):
        return
    done = path.with_name(path.name + ".imported")
    if not path.is_file():
        if explicit is not None and not done.is_file():
            raise NotFoundError(f"no key file at {path}")
        return
    imported, skipped = ApiKeys(mem.store).import_file(path)
    path.rename(done)
    click.echo(
        f"imported {imported} API keys from {path} into the store ({skipped} skipped: their user is gone or "
        f"the key is there already); the file is now {done}",
        err=True,
    )


def service_memory(store: str, embedder: str, llm: LLMChoice | None) -> Memory:
    """The Memory of a long-running service. It knows the LLM call log even with no LLM of its own (workers
    in another process write it), so that deleting a user or a block deletes their LLM calls too; it opens
    the file only once there is one, so a service without an LLM creates none (and starts on a full disk).
    With an LLM, if its call log cannot be made (a full or read-only disk), the service starts without
    extraction and says so: its calls could not be logged, nor deleted with their users."""
    try:
        return open_memory(
            store, embedder, llm, create=True, server_timeout_s=SERVICE_SERVER_TIMEOUT_S, long_lived=True
        )
    except StoreError as exc:
        if llm is None or "call log" not in str(exc):
            raise
        click.echo(
            f"memlane: extraction is off: the LLM call log cannot be opened ({exc.reason or exc}); jobs stay "
            "queued for a `memlane worker` (or a restart of this service) once it can.",
            err=True,
        )
    return open_memory(store, embedder, None, create=True, server_timeout_s=SERVICE_SERVER_TIMEOUT_S, long_lived=True)


def report_writes(mem: Memory) -> None:
    """Say at start when the store cannot take writes now (a full disk, a read-only file, ...): the service
    still starts and serves what needs no write, and the requests that do get a 503 with the reason."""
    try:
        mem.probe_write(timeout_s=1.0)
    except StoreError as exc:
        click.echo(
            f"memlane: the store cannot take writes now ({exc.reason or 'write failed'}): adds, new users and "
            "keys, retention policies and sweeps, and extraction get 503 with that reason until it can; "
            "searches, lists, reads and the queue status are served, and deletes are tried (a delete writes too).",
            err=True,
        )


def close_memory(mem: Memory) -> None:
    mem.close()  # and the call log it opened


@click.command("serve")
@setting_option("--host", setting="host", default="127.0.0.1", show_default=True)
@setting_option("--port", setting="port", type=PORT, default=8420, show_default=True)
@setting_option(
    "--workers",
    setting="workers",
    type=click.IntRange(0, MAX_CONCURRENCY),
    default=1,
    show_default=True,
    help="Extraction jobs run at once in this process (needs an LLM); 0: none, run `memlane worker` separately.",
)
@retention_every_option("Seconds between retention sweeps, run by the workers (with --workers > 0); 0: none.")
@setting_option(
    "--health-check-every",
    "health_check_every_s",
    setting="health_check_every",
    type=EVERY,
    default=DEFAULT_HEALTH_CHECK_EVERY_S,
    show_default=True,
    help="Seconds between the store's quick integrity checks (the first at start), whose result /healthz "
    "reports (503 'corrupt'); 0: none.",
)
@setting_option(
    "--max-body",
    setting="http_max_body",
    type=click.IntRange(1024, MAX_BODY_BYTES),
    default=DEFAULT_MAX_BODY_BYTES,
    show_default=True,
    help="Largest request body in bytes; larger ones get 413.",
)
@setting_option(
    "--insecure-dev",
    setting="insecure_dev",
    is_flag=True,
    help="Run without MEMLANE_ADMIN_KEY (admin routes open); loopback hosts only.",
)
@setting_option(
    "--agent-memory-api/--no-agent-memory-api",
    setting="agent_memory_api",
    default=True,
    show_default=True,
    help="Serve the Agent Memory API (its SDK's routes: /users, /prompts, /health) beside /v1.",
)
@timeout_option(
    "--agent-sync-timeout",
    "agent_sync_timeout_s",
    setting="agent_sync_timeout",
    default=DEFAULT_AGENT_SYNC_TIMEOUT_S,
    help="Seconds an Agent Memory add with async_processing false waits for its extraction, the LLM's retries "
    "included; then 502 UPSTREAM_ERROR, the blocks stored and left to the workers. Keep it under the "
    "clients' own timeout (the SDK's: 30 s).",
)
@log_level_option
@setting_option(
    "--access-log/--no-access-log",
    setting="access_log",
    default=True,
    show_default=True,
    help="One log line per request.",
)
@guard_options
@oidc_options
@keys_option
@store_options
@llm_options
def serve_cmd(
    host: str,
    port: int,
    workers: int,
    retention_every_s: float,
    health_check_every_s: float,
    max_body: int,
    insecure_dev: bool,
    agent_memory_api: bool,
    agent_sync_timeout_s: float,
    log_level: str,
    access_log: bool,
    allowed_hosts: str,
    read_timeout: float,
    oidc_jwks: Path | None,
    oidc_issuer: str,
    oidc_audience: str,
    oidc_user_claim: str,
    oidc_role_claim: str,
    keys_path: Path | None,
    store: str,
    embedder: str,
    llm: LLMChoice,
) -> None:
    """Serve the HTTP API (with the extraction workers) until SIGTERM or Ctrl-C.

    The admin key is read from MEMLANE_ADMIN_KEY only (never an option: it would show in `ps`); it must
    be at least 16 printable ASCII characters after trimming. Requests must name this server in their Host
    header (localhost, 127.0.0.1, [::1], the --host address, or --allowed-hosts).

    \b
    Example:
      MEMLANE_ADMIN_KEY=$(openssl rand -hex 24) memlane serve --port 8420 --workers 2
      memlane serve --insecure-dev --embedder hashing --workers 0     # local development only
    """
    admin_key = check_admin_key(cli_settings().secret("admin_key"), insecure_dev=insecure_dev, host=host)
    hosts = host_list(allowed_hosts, host)
    chosen: LLMChoice | None = llm if workers > 0 else None
    problem = llm_config_problem(chosen) if chosen is not None else None
    if problem is not None:
        click.echo(
            "memlane: extraction is off until an LLM is configured (MEMLANE_LLM_BASE_URL, MEMLANE_LLM_MODEL, "
            f"MEMLANE_LLM_API_KEY; here: {problem}). The API serves adds and searches; an add with extract=sync "
            "gets 400 config_error, and jobs queued by extract=async wait for a `memlane worker` with an LLM.",
            err=True,
        )
        chosen, workers = None, 0
    mem = service_memory(store, embedder, chosen)
    if chosen is not None and mem.llm is None:
        workers = 0
    try:
        report_writes(mem)
        import_key_file(mem, store, keys_path)
        service = HttpService(
            host,
            port,
            workers,
            log_level,
            access_log,
            max_body,
            hosts,
            read_timeout,
            retention_every_s,
            health_check_every_s,
            agent_memory_api,
            oidc_choice(oidc_jwks, oidc_issuer, oidc_audience, oidc_user_claim, oidc_role_claim),
            agent_sync_timeout_s,
        )
        run_http(mem, service, admin_key=admin_key, insecure_dev=insecure_dev)
    finally:
        close_memory(mem)


@click.command("mcp")
@setting_option(
    "--transport",
    setting="mcp_transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio (for one user, --user) or streamable HTTP (each request with an API key).",
)
@setting_option("--user", setting="mcp_user", default=None, help="Whose memory (stdio only).")
@setting_option("--host", setting="mcp_host", default="127.0.0.1", show_default=True, help="HTTP only.")
@setting_option("--port", setting="mcp_port", type=PORT, default=8421, show_default=True, help="HTTP only.")
@log_level_option
@guard_options
@keys_option
@store_options
def mcp_cmd(
    transport: str,
    user: str | None,
    host: str,
    port: int,
    log_level: str,
    allowed_hosts: str,
    read_timeout: float,
    keys_path: Path | None,
    store: str,
    embedder: str,
) -> None:
    """Run the MCP server: tools add_memory, search_memory, list_memories, delete_memory.

    \b
    Examples:
      memlane mcp --user alice                     # stdio, e.g. in an agent host's MCP config
      memlane mcp --transport http --port 8421     # clients send 'Authorization: Bearer <API key>'
    """
    if transport == "stdio" and user is None:
        raise ConfigError("stdio needs --user (or MEMLANE_MCP_USER): whose memory the tools use")
    if transport == "http" and user is not None:
        raise ConfigError("--user is for stdio; over HTTP each request's API key names the user")
    from memlane.core.names import check_stored_name

    # The rule of reads: a user named before the name rule can still read and delete through MCP; an add
    # under a name the rule refuses is a tool error naming the user.
    fixed_user = check_stored_name(user, "user") if user is not None else None
    hosts = host_list(allowed_hosts, host)
    mem = service_memory(store, embedder, None)
    try:
        if fixed_user is not None:
            run_mcp_stdio(mem, fixed_user)
        else:
            import_key_file(mem, store, keys_path)
            keys = ApiKeys(mem.store)
            run_mcp_http(mem, keys, McpHttpService(host, port, log_level, hosts, read_timeout))
    finally:
        close_memory(mem)


def register(group: click.Group) -> None:
    for cmd in (serve_cmd, mcp_cmd):
        group.add_command(cmd)
