"""The asyncio client of the HTTP service, on ``httpx.AsyncClient``: :class:`~memlane.client.Client`'s
methods as coroutines, with the same arguments, values and errors.

>>> from memlane.client import AsyncClient
>>> async with AsyncClient("http://127.0.0.1:8420", api_key="mlk_...") as mem:        # doctest: +SKIP
...     await mem.add([{"role": "user", "content": "I moved to Ghent."}])
...     hits = await mem.search("where do I live?", k=3)
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import httpx

from memlane.client.client import DEFAULT_TIMEOUT_S, _error
from memlane.client.errors import TransportError
from memlane.client.models import (
    Health,
    KeyInfo,
    NewKey,
    UserDeleted,
    add_result_from_json,
    block_from_json,
    deleted_from_json,
    health_from_json,
    hit_from_json,
    key_from_json,
    new_key_from_json,
    page_from_json,
    policies_from_json,
    prompt_from_json,
    prompt_version_from_json,
    queue_from_json,
    report_from_json,
    requeued_from_json,
    session_from_json,
    user_from_json,
    user_policy_from_json,
)
from memlane.client.payloads import (
    KEEP,
    PromptArg,
    TimeArg,
    add_body,
    apply_body,
    browse_body,
    drop_none,
    list_params,
    policy_body,
    requeue_body,
    retention_path,
    search_body,
    session_body,
    time_value,
    update_body,
    user_body,
    user_update_body,
    users_params,
    write_body,
)
from memlane.client.payloads import segment as _segment
from memlane.core.jobs import QueueStatus, Requeued
from memlane.core.model import AddResult, Filters, Hit, MemoryBlock, Page, Prompt, PromptVersion, Session, UserInfo
from memlane.core.retention import Policies, RetentionPolicy, RetentionReport


class AsyncClient:
    """An asyncio client of one memlane server with one key (a user's, or the admin's).

    ``transport`` replaces httpx's network transport (tests pass ``httpx.ASGITransport(app)``). Use it as an
    async context manager or await :meth:`close`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, transport=transport, timeout=timeout)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- memories (a user's key) -----------------------------------------------------------------------------

    async def add(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        conversation_id: str = "default",
        session_id: str = "default",
        time: TimeArg = None,
        perspective: Literal["dual", "speakers", "single"] = "dual",
        extract: Literal["off", "async", "sync"] = "off",
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: PromptArg = None,
    ) -> AddResult:
        """See :meth:`Client.add`."""
        body = add_body(messages, conversation_id, session_id, time, perspective, extract, annotations, ttl_s, prompt)
        return add_result_from_json(await self._call("POST", "/v1/memories", json=body))

    async def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: str = "hybrid",
        before: TimeArg = None,
        after: TimeArg = None,
        at: TimeArg = None,
        filters: Filters | None = None,
        explain: bool = False,
    ) -> builtins.list[Hit]:
        """See :meth:`Client.search`."""
        body = search_body(query, k, mode, before, after, at, filters, explain)
        return [hit_from_json(h) for h in await self._call("POST", "/v1/search", json=body)]

    async def get(self, block_id: str) -> MemoryBlock:
        return block_from_json(await self._call("GET", f"/v1/memories/{_segment(block_id)}"))

    async def list(
        self,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[MemoryBlock]:
        params = list_params(conversation_id, session_id, limit, offset)
        return [block_from_json(b) for b in await self._call("GET", "/v1/memories", params=params)]

    async def delete(self, block_id: str) -> None:
        await self._call("DELETE", f"/v1/memories/{_segment(block_id)}")

    async def queue_status(self) -> QueueStatus:
        return queue_from_json(await self._call("GET", "/v1/queue"))

    async def requeue(
        self,
        *,
        user: str | None = None,
        since: TimeArg = None,
        block_ids: Sequence[str] | None = None,
        dead_only: bool = True,
    ) -> Requeued:
        body = requeue_body(user, since, block_ids, dead_only)
        return requeued_from_json(await self._call("POST", "/v1/queue/retry", json=body))

    async def add_facts(
        self,
        facts: Sequence[str],
        *,
        session_id: str = "default",
        conversation_id: str = "default",
        time: TimeArg = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: PromptArg = None,
        extract: Literal["off", "async", "sync"] = "off",
    ) -> AddResult:
        """Store standalone facts, one block of kind ``fact`` each; see :meth:`Memory.add_facts`."""
        body = {
            "facts": list(facts),
            **write_body(session_id, conversation_id, time, annotations, ttl_s, prompt, extract),
        }
        return add_result_from_json(await self._call("POST", "/v1/facts", json=body))

    async def add_exchanges(
        self,
        pairs: Sequence[tuple[str, str]],
        *,
        session_id: str = "default",
        conversation_id: str = "default",
        time: TimeArg = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: PromptArg = None,
        extract: Literal["off", "async", "sync"] = "off",
    ) -> AddResult:
        """Store exchanges given as (user_content, assistant_content), one block each with its two sides kept;
        see :meth:`Memory.add_exchanges`."""
        exchanges = [{"user_content": u, "assistant_content": a} for u, a in pairs]
        body = {
            "exchanges": exchanges,
            **write_body(session_id, conversation_id, time, annotations, ttl_s, prompt, extract),
        }
        return add_result_from_json(await self._call("POST", "/v1/exchanges", json=body))

    async def update(
        self,
        block_id: str,
        *,
        content: str | None = None,
        sides: tuple[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: PromptArg = None,
        extract: Literal["off", "async"] | None = None,
    ) -> MemoryBlock:
        """Update a block in place (same id): a fact's ``content`` or an exchange's ``sides``, its annotations
        (replaced), its TTL (from now); see :meth:`Memory.update`."""
        body = update_body(content, sides, annotations, ttl_s, prompt, extract)
        return block_from_json(await self._call("PATCH", f"/v1/memories/{_segment(block_id)}", json=body))

    async def set_ttl(
        self, ttl_s: int, *, session_id: str | None = None, block_ids: Sequence[str] | None = None
    ) -> int:
        """A new TTL from now for all the blocks, one session's or the listed ones; how many changed."""
        body = drop_none(
            {"ttl_s": ttl_s, "session_id": session_id, "block_ids": None if block_ids is None else list(block_ids)}
        )
        return int((await self._call("POST", "/v1/memories/ttl", json=body))["changed"])

    async def browse(
        self,
        filters: Filters | None = None,
        *,
        order: Literal["ingested", "event"] = "ingested",
        limit: int = 100,
        offset: int = 0,
        before: TimeArg = None,
        after: TimeArg = None,
    ) -> Page[MemoryBlock]:
        """The query-less search: every block that passes ``filters``, newest first, a page with the total."""
        body = browse_body(filters, order, limit, offset, before, after)
        return page_from_json(await self._call("POST", "/v1/browse", json=body), block_from_json)

    async def requeue_block(self, block_id: str) -> MemoryBlock:
        """Queue a failed block's extraction again."""
        return block_from_json(await self._call("POST", f"/v1/memories/{_segment(block_id)}/requeue"))

    # -- sessions (a user's key) -----------------------------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        *,
        conversation_id: str = "default",
        started_at: TimeArg = None,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
        exist_ok: bool = False,
    ) -> Session:
        """Start a session; AlreadyExistsError if it exists, unless ``exist_ok``."""
        body = session_body(session_id, conversation_id, started_at, annotations, metadata, default_ttl_s, exist_ok)
        return session_from_json(await self._call("POST", "/v1/sessions", json=body))

    async def get_session(self, session_id: str) -> Session:
        return session_from_json(await self._call("GET", f"/v1/sessions/{_segment(session_id)}"))

    async def list_sessions(self, *, limit: int = 100, offset: int = 0) -> Page[Session]:
        """The sessions, the latest started first."""
        params = {"limit": limit, "offset": offset}
        return page_from_json(await self._call("GET", "/v1/sessions", params=params), session_from_json)

    async def update_session(
        self,
        session_id: str,
        *,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
    ) -> Session:
        """Replace what is given; SessionEndedError once it has ended."""
        body = drop_none(
            {
                "annotations": None if annotations is None else dict(annotations),
                "metadata": None if metadata is None else dict(metadata),
                "default_ttl_s": default_ttl_s,
            }
        )
        return session_from_json(await self._call("PATCH", f"/v1/sessions/{_segment(session_id)}", json=body))

    async def end_session(self, session_id: str, *, at: TimeArg = None) -> Session:
        """End the session (its blocks stay readable); SessionEndedError if it had ended."""
        body = drop_none({"at": time_value(at)})
        return session_from_json(await self._call("POST", f"/v1/sessions/{_segment(session_id)}/end", json=body))

    async def delete_session(self, session_id: str) -> int:
        """Delete the session and its blocks; how many blocks went."""
        return int((await self._call("DELETE", f"/v1/sessions/{_segment(session_id)}"))["blocks_deleted"])

    # -- the prompt registry (reads: any key; writes: the admin key) -----------------------------------------

    async def create_prompt(
        self, prompt_id: str, text: str, *, description: str = "", annotations: Mapping[str, str] | None = None
    ) -> Prompt:
        """A new extraction prompt at version 0."""
        body = drop_none(
            {
                "prompt_id": prompt_id,
                "text": text,
                "description": description,
                "annotations": None if annotations is None else dict(annotations),
            }
        )
        return prompt_from_json(await self._call("POST", "/v1/prompts", json=body))

    async def prompt(self, prompt_id: str) -> Prompt:
        return prompt_from_json(await self._call("GET", f"/v1/prompts/{_segment(prompt_id)}"))

    async def prompts(self, *, limit: int = 100, offset: int = 0, include_archived: bool = False) -> Page[Prompt]:
        params = {"limit": limit, "offset": offset, "include_archived": include_archived}
        return page_from_json(await self._call("GET", "/v1/prompts", params=params), prompt_from_json)

    async def prompt_versions(self, prompt_id: str, *, limit: int = 100, offset: int = 0) -> Page[PromptVersion]:
        path = f"/v1/prompts/{_segment(prompt_id)}/versions"
        return page_from_json(
            await self._call("GET", path, params={"limit": limit, "offset": offset}), prompt_version_from_json
        )

    async def prompt_version(self, prompt_id: str, version: int) -> PromptVersion:
        path = f"/v1/prompts/{_segment(prompt_id)}/versions/{int(version)}"
        return prompt_version_from_json(await self._call("GET", path))

    async def update_prompt(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Prompt:
        """New text adds a version that becomes current."""
        body = drop_none(
            {
                "text": text,
                "description": description,
                "annotations": None if annotations is None else dict(annotations),
            }
        )
        return prompt_from_json(await self._call("PATCH", f"/v1/prompts/{_segment(prompt_id)}", json=body))

    async def archive_prompt(self, prompt_id: str, version: int | None = None) -> None:
        """Archive one version, or the whole prompt (its id stays reserved)."""
        await self._call("POST", f"/v1/prompts/{_segment(prompt_id)}/archive", json=drop_none({"version": version}))

    async def purge_prompt(self, prompt_id: str, version: int | None = None) -> None:
        """Purge one version, or the whole prompt (its id is free again)."""
        params = drop_none({"version": version})
        await self._call("DELETE", f"/v1/prompts/{_segment(prompt_id)}", params=params)

    # -- users (the admin key; get_user and update_user also with the user's own key) ------------------------

    async def get_user(self, user: str) -> UserInfo:
        return user_from_json(await self._call("GET", f"/v1/users/{_segment(user)}"))

    async def update_user(
        self, user: str, *, display_name: str | None = KEEP, metadata: Mapping[str, Any] | None = KEEP
    ) -> UserInfo:
        """Replace the display name and/or metadata given; one left out is kept (``display_name=None`` clears
        the name, ``metadata=None`` empties the metadata)."""
        body = user_update_body(display_name, metadata)
        return user_from_json(await self._call("PATCH", f"/v1/users/{_segment(user)}", json=body))

    async def list_users(
        self,
        *,
        name: str | None = None,
        metadata: Mapping[str, str] | None = None,
        limit: int = 100,
        offset: int = 0,
        contains: str | None = None,
    ) -> Page[UserInfo]:
        """The users with the exact display name ``name``, every ``metadata`` pair, and ``contains`` in their
        name or display name (any case), a page with the total."""
        response = await self._send("GET", "/v1/users", params=users_params(name, metadata, limit, offset, contains))
        if not response.is_success:
            raise _error(response)
        users = [user_from_json(u) for u in response.json()]
        return Page(items=users, total=int(response.headers["X-Total-Count"]), limit=limit, offset=offset)

    # -- users and keys --------------------------------------------------------------------------------------

    async def create_user(
        self,
        user: str,
        *,
        display_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
    ) -> bool:
        body = user_body(user, display_name, metadata, exist_ok)
        return bool((await self._call("POST", "/v1/users", json=body))["created"])

    async def users(self) -> builtins.list[UserInfo]:
        return [user_from_json(u) for u in await self._call("GET", "/v1/users")]

    async def create_key(self, user: str, label: str = "") -> NewKey:
        return new_key_from_json(await self._call("POST", f"/v1/users/{_segment(user)}/keys", json={"label": label}))

    async def keys(self, user: str) -> builtins.list[KeyInfo]:
        return [key_from_json(k) for k in await self._call("GET", f"/v1/users/{_segment(user)}/keys")]

    async def revoke_key(self, user: str, key_id: str) -> None:
        await self._call("DELETE", f"/v1/users/{_segment(user)}/keys/{_segment(key_id)}")

    async def delete_user(self, user: str) -> UserDeleted:
        return deleted_from_json(await self._call("DELETE", f"/v1/users/{_segment(user)}"))

    async def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """See :meth:`Client.set_retention`."""
        path = retention_path(user)
        if policy is None:
            await self._call("DELETE", path)
        else:
            await self._call("PUT", path, json=policy_body(policy))

    async def retention(self, user: str) -> tuple[RetentionPolicy | None, str]:
        return user_policy_from_json(await self._call("GET", retention_path(user)))

    async def retention_policies(self) -> Policies:
        return policies_from_json(await self._call("GET", "/v1/retention"))

    async def apply_retention(
        self, *, at: TimeArg = None, user: str | None = None, dry_run: bool = False
    ) -> RetentionReport:
        body = apply_body(at, user, dry_run)
        return report_from_json(await self._call("POST", "/v1/retention/apply", json=body))

    # -- operations ------------------------------------------------------------------------------------------

    async def health(self) -> Health:
        response = await self._send("GET", "/healthz")
        if response.status_code not in (200, 503):
            raise _error(response)
        return health_from_json(response.json())

    async def metrics(self) -> str:
        response = await self._send("GET", "/metrics")
        if not response.is_success:
            raise _error(response)
        return response.text

    # -- plumbing --------------------------------------------------------------------------------------------

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        response = await self._send(method, path, **kw)
        if not response.is_success:
            raise _error(response)
        return None if response.status_code == 204 else response.json()

    async def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
