"""The MCP server: eight tools over the same core as the HTTP API.

Who the tools act for:

* **stdio**: one fixed user, given when the server is started (``memlane mcp --user alice``). The agent host
  that launches the process decides whose memory it is, as it decides which files a file tool may read.
* **streamable HTTP**: each request carries one of the users' API keys (``Authorization: Bearer``, the same
  keys as the HTTP service's: both check them with :mod:`memlane.core.apikeys` against the store); the
  SDK's bearer middleware refuses requests without a valid key (401), and the tools act for the key's
  user, with the key's role. Sessions are bound to the key's user by the SDK, so another key cannot ride
  on them. (OpenID Connect tokens are the HTTP service's only: this transport refuses them, 401.)

What a key may do: every tool says whether it writes (:func:`reads`, :func:`writes`); a read-only key gets
a tool error from every tool that writes, as it gets 403 from every HTTP route that writes. The check is
made once, where the tools are registered (:func:`add_tools`), and a tool that says neither is refused
there, so a new tool cannot be served without the check. Over stdio the agent host that started the
server for ``--user`` decides, as over the HTTP service with a read-write key: every tool runs.

The tools return the same JSON shapes as the HTTP API (``BlockOut``, ``HitOut``, ``AddOut``). A tool
error says what was wrong with the input; a failure of the store, the embedder or the LLM is told in
general words with a request id, and its detail (paths, SQL) goes to the server log under that id.

Over HTTP the transport has the HTTP service's guards (:func:`guarded_http_app`): the ``Host`` allowlist,
the SDK's ``Origin`` check against the same names (a browser page of another site gets 403), and the
deadlines for slow clients.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import AnyHttpUrl, Field
from starlette.types import ASGIApp

from memlane.core.apikeys import ROLE_READ_ONLY, ApiKeys
from memlane.core.errors import ConfigError, ConflictError, MemlaneError, NotFoundError, ValidationError
from memlane.core.memory import Memory
from memlane.core.model import AddResult, Hit, MemoryBlock
from memlane.core.model_checks import MAX_TTL_S
from memlane.interfaces.wire.errors import check_extract, public_message
from memlane.interfaces.wire.filters import make_filters
from memlane.interfaces.wire.hosts import ANY_HOST, HostCheckMiddleware
from memlane.interfaces.wire.requestid import RequestIdMiddleware, new_request_id
from memlane.interfaces.wire.retention import UserPolicyOut, policy_out
from memlane.interfaces.wire.running import configure_logging, run_uvicorn, uvicorn_config
from memlane.interfaces.wire.schemas import (
    MAX_OFFSET,
    AddOut,
    BlockOut,
    HitOut,
    MessageIn,
    TimeValue,
    add_out,
    block_out,
    hit_out,
)
from memlane.interfaces.wire.slow import ReadTimeoutMiddleware
from memlane.interfaces.wire.updates import new_sides

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("memlane.mcp")
# The token's claims carrying the store's deletion epoch read with the key (see memlane.core.apikeys) and
# the key's role.
EPOCH_CLAIM = "memlane_deletion_epoch"
ROLE_CLAIM = "memlane_role"
# Where a tool's declaration (reads or writes) is kept on its function.
_WRITES = "_memlane_writes"
TtlArg = Annotated[
    int | None,
    Field(ge=0, le=MAX_TTL_S, description="Seconds until the memory is forgotten (0: never; default: the session's)."),
]
AnnotationsArg = Annotated[dict[str, str] | None, Field(description="String labels kept on the memories.")]
INSTRUCTIONS = (
    "Long-term memory of one user. Store conversation turns with add_memory and standalone facts with add_fact; "
    "before answering a question "
    "about the user's past, call search_memory. Times are ISO 8601 or epoch seconds."
)


class ApiKeyVerifier:
    """The SDK's TokenVerifier over memlane's API keys: a valid key becomes a token whose client is its user."""

    def __init__(self, keys: ApiKeys) -> None:
        self.keys = keys

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = await anyio.to_thread.run_sync(self.keys.verify, token)
        if verified is None:
            return None
        user = verified.user
        claims = {EPOCH_CLAIM: verified.epoch, ROLE_CLAIM: verified.record.role}
        return AccessToken(token=token, client_id=user, subject=user, scopes=[], claims=claims)


def reads(fn: F) -> F:
    """Declares a tool that only reads: any key may call it."""
    setattr(fn, _WRITES, False)
    return fn


def writes(fn: F) -> F:
    """Declares a tool that writes: a read-only key gets a tool error instead."""
    setattr(fn, _WRITES, True)
    return fn


class MemoryTools:
    """The tools, bound to a Memory and to how the caller's user is found."""

    def __init__(self, memory: Memory, user: str | None) -> None:
        self.memory = memory
        self.fixed_user = user

    def user(self) -> str:
        """The fixed user (stdio), else the user of the request's API key (HTTP)."""
        if self.fixed_user is not None:
            return self.fixed_user
        token = get_access_token()
        if token is None:
            raise ToolError("no user: start the server with --user, or call it with an API key")
        return token.client_id

    def require_write(self, tool: str) -> None:
        """ToolError unless the caller may write: over HTTP, a key whose role is not read-only (a token
        without a role reads only); over stdio, always."""
        if self.fixed_user is not None:
            return
        token = get_access_token()
        role = (token.claims or {}).get(ROLE_CLAIM) if token is not None else None
        if role is None or role == ROLE_READ_ONLY:
            raise ToolError(f"{tool} writes, and this key is read-only: writes need a read-write or admin key")

    def epoch(self) -> int | None:
        """The deletion epoch read with the request's key (HTTP); None with a fixed user (stdio)."""
        token = None if self.fixed_user is not None else get_access_token()
        value = (token.claims or {}).get(EPOCH_CLAIM) if token is not None else None
        return value if isinstance(value, int) else None

    async def run(self, fn: Callable[[], T]) -> T:
        """Run a core call in a worker thread; core errors become tool errors the model can read."""
        try:
            return await anyio.to_thread.run_sync(fn)
        except (ValidationError, NotFoundError, ConfigError, ConflictError) as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        except MemlaneError as exc:
            rid = new_request_id()
            log.error("request %s: MCP tool failed: %s: %s", rid, type(exc).__name__, exc)
            raise ToolError(f"{type(exc).__name__}: {public_message(exc, rid)}") from exc

    @writes
    async def add_memory(
        self,
        messages: Annotated[list[MessageIn], Field(min_length=1, description="The turns, oldest first.")],
        conversation_id: str = "default",
        session_id: str = "default",
        time: Annotated[TimeValue | None, Field(description="When the session happened; default now.")] = None,
        perspective: Literal["dual", "speakers", "single"] = "dual",
        extract: Literal["off", "async", "sync"] = "off",
        annotations: Annotated[
            dict[str, str] | None,
            Field(description="String labels kept on the blocks (keys: letters, digits, '_'), to filter searches by."),
        ] = None,
        ttl_s: TtlArg = None,
    ) -> AddOut:
        """Remember conversation turns ({"role": "user"|"assistant", "content": ...}, or {"speaker": name,
        "content": ...} for a chat between two people) as memory blocks."""
        user, epoch = self.user(), self.epoch()
        raw = [m.model_dump(exclude_none=True) for m in messages]

        def add() -> AddResult:
            check_extract(extract, self.memory.llm is not None)
            return self.memory.add(
                user,
                raw,
                conversation_id=conversation_id,
                session_id=session_id,
                time=time,
                perspective=perspective,
                extract=extract,
                epoch=epoch,
                annotations=annotations,
                ttl_s=ttl_s,
            )

        return add_out(await self.run(add))

    @writes
    async def add_fact(
        self,
        facts: Annotated[list[str], Field(min_length=1, description="Standalone facts, one memory each.")],
        session_id: str = "default",
        time: Annotated[TimeValue | None, Field(description="When it was learnt; default now.")] = None,
        annotations: AnnotationsArg = None,
        ttl_s: TtlArg = None,
    ) -> AddOut:
        """Remember standalone facts about the user ("Alice is allergic to peanuts."), one memory each."""
        user = self.user()
        res = await self.run(
            lambda: self.memory.add_facts(
                user, facts, session_id=session_id, time=time, annotations=annotations, ttl_s=ttl_s
            )
        )
        return add_out(res)

    @reads
    async def search_memory(
        self,
        query: Annotated[str, Field(min_length=1, description="What to look for, in plain words.")],
        k: Annotated[int, Field(ge=1, le=100)] = 10,
        mode: Annotated[str, Field(description="hybrid (default), vector or keyword")] = "hybrid",
        before: Annotated[TimeValue | None, Field(description="Only memories from before this time.")] = None,
        after: Annotated[TimeValue | None, Field(description="Only memories from this time on.")] = None,
        at: Annotated[
            TimeValue | None,
            Field(description="When the question is asked (default: now), for phrases like 'two weeks ago'."),
        ] = None,
        sessions: Annotated[list[str] | None, Field(description="Only memories of these sessions.")] = None,
        annotations: Annotated[
            dict[str, str] | None, Field(description="Only memories with every one of these labels, exactly.")
        ] = None,
        kinds: Annotated[
            list[Literal["exchange", "fact"]] | None, Field(description="Only these kinds: exchange, fact.")
        ] = None,
        explain: Annotated[
            bool, Field(description="true: each hit says why it ranked (each retriever's rank, the context gains).")
        ] = False,
    ) -> list[HitOut]:
        """The memories most relevant to the query, best first, each with its time."""
        user = self.user()

        def search() -> list[Hit]:
            filters = make_filters(sessions=sessions, annotations=annotations, kinds=kinds)
            return self.memory.search(
                user, query, k, mode=mode, before=before, after=after, at=at, filters=filters, explain=explain
            )

        return [hit_out(h) for h in await self.run(search)]

    @writes
    async def update_memory(
        self,
        block_id: Annotated[str, Field(min_length=1, max_length=64)],
        content: Annotated[str | None, Field(description="A fact's new text.")] = None,
        user_content: Annotated[str | None, Field(description="An exchange's new user side.")] = None,
        assistant_content: Annotated[str | None, Field(description="An exchange's new assistant side.")] = None,
        annotations: Annotated[dict[str, str] | None, Field(description="Replace its labels.")] = None,
        ttl_s: TtlArg = None,
    ) -> BlockOut:
        """Correct a memory in place (same block_id): a fact's content, or an exchange's sides."""
        user = self.user()

        def update() -> MemoryBlock:
            kw: dict[str, Any] = {}
            if content is not None:
                kw["content"] = content
            if user_content is not None or assistant_content is not None:
                kw["sides"] = new_sides(self.memory.get(user, block_id), user_content, assistant_content)
            return self.memory.update(user, block_id, annotations=annotations, ttl_s=ttl_s, **kw)

        return block_out(await self.run(update))

    @writes
    async def end_session(self, session_id: Annotated[str, Field(min_length=1)]) -> str:
        """End a session: its memories stay searchable; nothing more can be added to it."""
        user = self.user()
        await self.run(lambda: self.memory.end_session(user, session_id))
        return f"ended {session_id}"

    @reads
    async def list_memories(
        self,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
        offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0,
    ) -> list[BlockOut]:
        """Stored memories in time order (optionally of one conversation or session)."""
        user = self.user()
        blocks = await self.run(
            lambda: self.memory.list(
                user, conversation_id=conversation_id, session_id=session_id, limit=limit, offset=offset
            )
        )
        return [block_out(b) for b in blocks]

    @writes
    async def delete_memory(self, block_id: Annotated[str, Field(min_length=1, max_length=64)]) -> str:
        """Forget one memory block by its block_id."""
        user = self.user()
        await self.run(lambda: self.memory.delete(user, block_id))
        return f"deleted {block_id}"

    @reads
    async def retention_policy(self) -> UserPolicyOut:
        """How long this user's memories are kept: the retention policy that applies (max_age_days by when
        a memory was said, max_blocks newest kept; null: kept until deleted). Read-only: MCP callers act
        for one user, and only the admin sets policies (HTTP admin routes or `memlane retention set`)."""
        user = self.user()
        # What applies to the user, also before their first memory (then the default, as it will be).
        policy, source = (await self.run(self.memory.retention_policies)).effective(user)
        return UserPolicyOut(user=user, policy=policy_out(policy), source=source)


def transport_security(allowed: Sequence[str]) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding settings for the allowlist: each name with any port as ``Host``, and as the
    ``Origin`` of a page (http or https). ``"*"`` turns the check off (a proxy in front checks names)."""
    if ANY_HOST in allowed:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [h for name in allowed for h in (name, f"{name}:*")]
    origins = [f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def guarded_http_app(server: MCPServer, *, host: str, allowed_hosts: Sequence[str], read_timeout_s: float) -> ASGIApp:
    """The streamable HTTP app of ``server`` behind the HTTP service's guards: request ids, the Host
    allowlist (421 before authentication), the body deadline; the SDK checks ``Origin`` (403)."""
    app: ASGIApp = server.streamable_http_app(host=host, transport_security=transport_security(allowed_hosts))
    app = ReadTimeoutMiddleware(app, timeout_s=read_timeout_s)
    app = HostCheckMiddleware(app, allowed=allowed_hosts, exempt=frozenset())
    return RequestIdMiddleware(app)


def build_server(
    memory: Memory,
    *,
    user: str | None = None,
    keys: ApiKeys | None = None,
    server_url: str = "http://127.0.0.1:8421",
) -> MCPServer:
    """An MCP server whose tools act for ``user`` (stdio), or for the user of each request's API key
    (streamable HTTP, ``keys`` given). ``server_url`` is where the HTTP transport is served (the SDK wants
    it as the token issuer; no OAuth routes are published)."""
    if (user is None) == (keys is None):
        raise ValueError("give exactly one of user (stdio) or keys (HTTP with API keys)")
    auth = None
    if keys is not None:
        auth = AuthSettings(issuer_url=AnyHttpUrl(server_url), resource_server_url=None)
    server: MCPServer = MCPServer(
        "memlane",
        instructions=INSTRUCTIONS,
        token_verifier=ApiKeyVerifier(keys) if keys is not None else None,
        auth=auth,
    )
    tools = MemoryTools(memory, user)
    add_tools(
        server,
        tools,
        (
            tools.add_memory,
            tools.add_fact,
            tools.search_memory,
            tools.list_memories,
            tools.update_memory,
            tools.delete_memory,
            tools.end_session,
            tools.retention_policy,
        ),
    )
    return server


def add_tools(server: MCPServer, tools: MemoryTools, fns: Sequence[Callable[..., Any]]) -> None:
    """Register ``fns`` as tools, each behind the role check if it writes (MCP clients see it too, as the
    tool's ``readOnlyHint``). TypeError for a tool that does not say whether it writes (:func:`reads`,
    :func:`writes`): no tool is served without the check."""
    for fn in fns:
        declared = getattr(fn, _WRITES, None)
        if not isinstance(declared, bool):
            raise TypeError(
                f"MCP tool {fn.__name__} does not say whether it writes: decorate it with @reads or @writes"
            )
        server.add_tool(
            _checked(tools, fn) if declared else fn, annotations=ToolAnnotations(read_only_hint=not declared)
        )


def _checked(tools: MemoryTools, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` behind :meth:`MemoryTools.require_write` (same name, signature and schema for the SDK)."""

    @wraps(fn)
    async def tool(**kwargs: Any) -> Any:
        tools.require_write(fn.__name__)
        return await fn(**kwargs)

    return tool


def serve_http(
    memory: Memory,
    keys: ApiKeys,
    *,
    host: str,
    port: int,
    log_level: str,
    allowed_hosts: Sequence[str],
    read_timeout_s: float,
) -> None:
    """The streamable HTTP transport under uvicorn at ``http://HOST:PORT/mcp`` until SIGTERM or Ctrl-C, with
    the HTTP service's guards: the Host allowlist (and the SDK's Origin check against the same names), the
    read deadlines."""
    import uvicorn

    configure_logging(log_level)
    app = guarded_http_app(
        build_server(memory, keys=keys, server_url=f"http://{host}:{port}"),
        host=host,
        allowed_hosts=allowed_hosts,
        read_timeout_s=read_timeout_s,
    )
    config = uvicorn_config(app, host=host, port=port, log_level=log_level, read_timeout_s=read_timeout_s)
    run_uvicorn(uvicorn.Server(config))
