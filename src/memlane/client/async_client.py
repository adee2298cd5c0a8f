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
    policies_from_json,
    queue_from_json,
    report_from_json,
    requeued_from_json,
    user_from_json,
    user_policy_from_json,
)
from memlane.client.payloads import (
    TimeArg,
    add_body,
    apply_body,
    list_params,
    policy_body,
    requeue_body,
    retention_path,
    search_body,
)
from memlane.client.payloads import segment as _segment
from memlane.core.jobs import QueueStatus, Requeued
from memlane.core.model import AddResult, Hit, MemoryBlock, UserInfo
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
    ) -> AddResult:
        """See :meth:`Client.add`."""
        body = add_body(messages, conversation_id, session_id, time, perspective, extract, annotations)
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
    ) -> builtins.list[Hit]:
        """See :meth:`Client.search`."""
        body = search_body(query, k, mode, before, after, at)
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

    # -- users and keys --------------------------------------------------------------------------------------

    async def create_user(self, user: str) -> bool:
        return bool((await self._call("POST", "/v1/users", json={"user": user}))["created"])

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
