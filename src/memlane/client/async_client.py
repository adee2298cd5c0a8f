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
from dataclasses import asdict
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

import httpx

from memlane.client.client import DEFAULT_TIMEOUT_S, TimeArg, _drop_none, _error, _segment, _time
from memlane.client.errors import TransportError
from memlane.client.models import (
    Health,
    KeyInfo,
    NewKey,
    UserDeleted,
    add_result_from_json,
    block_from_json,
    health_from_json,
    hit_from_json,
    policy_from_json,
    queue_from_json,
    report_from_json,
    user_from_json,
)
from memlane.core.jobs import QueueStatus
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
    ) -> AddResult:
        """See :meth:`Client.add`."""
        body = {
            "messages": [_drop_none({**m, "time": _time(m.get("time"))}) for m in messages],
            "conversation_id": conversation_id,
            "session_id": session_id,
            "time": _time(time),
            "perspective": perspective,
            "extract": extract,
        }
        return add_result_from_json(await self._call("POST", "/v1/memories", json=_drop_none(body)))

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
        body = {"query": query, "k": k, "mode": mode, "before": _time(before), "after": _time(after), "at": _time(at)}
        return [hit_from_json(h) for h in await self._call("POST", "/v1/search", json=_drop_none(body))]

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
        params = _drop_none(
            {"conversation_id": conversation_id, "session_id": session_id, "limit": limit, "offset": offset}
        )
        return [block_from_json(b) for b in await self._call("GET", "/v1/memories", params=params)]

    async def delete(self, block_id: str) -> None:
        await self._call("DELETE", f"/v1/memories/{_segment(block_id)}")

    async def queue_status(self) -> QueueStatus:
        return queue_from_json(await self._call("GET", "/v1/queue"))

    # -- users and keys --------------------------------------------------------------------------------------

    async def create_user(self, user: str) -> bool:
        return bool((await self._call("POST", "/v1/users", json={"user": user}))["created"])

    async def users(self) -> builtins.list[UserInfo]:
        return [user_from_json(u) for u in await self._call("GET", "/v1/users")]

    async def create_key(self, user: str, label: str = "") -> NewKey:
        d = await self._call("POST", f"/v1/users/{_segment(user)}/keys", json={"label": label})
        return NewKey(key=d["key"], key_id=d["key_id"], user=d["user"], label=d["label"])

    async def keys(self, user: str) -> builtins.list[KeyInfo]:
        return [
            KeyInfo(k["key_id"], k["user"], k["label"], datetime.fromisoformat(k["created_at"]))
            for k in await self._call("GET", f"/v1/users/{_segment(user)}/keys")
        ]

    async def revoke_key(self, user: str, key_id: str) -> None:
        await self._call("DELETE", f"/v1/users/{_segment(user)}/keys/{_segment(key_id)}")

    async def delete_user(self, user: str) -> UserDeleted:
        d = await self._call("DELETE", f"/v1/users/{_segment(user)}")
        return UserDeleted(user=d["user"], blocks_deleted=int(d["blocks_deleted"]), keys_deleted=int(d["keys_deleted"]))

    async def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """See :meth:`Client.set_retention`."""
        path = "/v1/retention/default" if user is None else f"/v1/users/{_segment(user)}/retention"
        if policy is None:
            await self._call("DELETE", path)
        else:
            await self._call("PUT", path, json=_drop_none(asdict(policy)))

    async def retention(self, user: str) -> tuple[RetentionPolicy | None, str]:
        d = await self._call("GET", f"/v1/users/{_segment(user)}/retention")
        return policy_from_json(d["policy"]), str(d["source"])

    async def retention_policies(self) -> Policies:
        d = await self._call("GET", "/v1/retention")
        users = {name: policy_from_json(p) for name, p in d["users"].items()}
        return Policies(default=policy_from_json(d["default"]), users={k: v for k, v in users.items() if v})

    async def apply_retention(
        self, *, at: TimeArg = None, user: str | None = None, dry_run: bool = False
    ) -> RetentionReport:
        body = _drop_none({"at": _time(at), "user": user, "dry_run": dry_run})
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
