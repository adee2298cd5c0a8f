"""The asyncio client of the HTTP service, on ``httpx.AsyncClient``: :class:`~memlane.client.Client`'s
methods as coroutines, with the same arguments, values and errors.

>>> from memlane.client import AsyncClient
>>> async with AsyncClient("http://127.0.0.1:8420", api_key="mlk_...") as mem:        # doctest: +SKIP
...     await mem.add([{"role": "user", "content": "I moved to Ghent."}])
...     hits = await mem.search("where do I live?", k=3)
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

import httpx

from memlane.client import endpoints
from memlane.client.calls import Async, Call, auth_headers
from memlane.client.client import DEFAULT_TIMEOUT_S
from memlane.client.errors import TransportError

T = TypeVar("T")


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
        headers = auth_headers(api_key)
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, transport=transport, timeout=timeout)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- memories (a user's key) ------------------------------------------------------------------------------

    add = Async(endpoints.add)
    search = Async(endpoints.search)
    get = Async(endpoints.get)
    list = Async(endpoints.list_blocks)
    delete = Async(endpoints.delete)
    queue_status = Async(endpoints.queue_status)
    requeue = Async(endpoints.requeue)
    add_facts = Async(endpoints.add_facts)
    add_exchanges = Async(endpoints.add_exchanges)
    update = Async(endpoints.update)
    set_ttl = Async(endpoints.set_ttl)
    browse = Async(endpoints.browse)
    requeue_block = Async(endpoints.requeue_block)

    # -- sessions (a user's key) ------------------------------------------------------------------------------

    create_session = Async(endpoints.create_session)
    get_session = Async(endpoints.get_session)
    list_sessions = Async(endpoints.list_sessions)
    update_session = Async(endpoints.update_session)
    end_session = Async(endpoints.end_session)
    delete_session = Async(endpoints.delete_session)

    # -- the prompt registry (reads: any key; writes: the admin key) ------------------------------------------

    create_prompt = Async(endpoints.create_prompt)
    prompt = Async(endpoints.prompt)
    prompts = Async(endpoints.prompts)
    prompt_versions = Async(endpoints.prompt_versions)
    prompt_version = Async(endpoints.prompt_version)
    update_prompt = Async(endpoints.update_prompt)
    archive_prompt = Async(endpoints.archive_prompt)
    purge_prompt = Async(endpoints.purge_prompt)

    # -- users (the admin key; get_user and update_user also with the user's own key) -------------------------

    get_user = Async(endpoints.get_user)
    update_user = Async(endpoints.update_user)
    list_users = Async(endpoints.list_users)

    # -- users and keys (the admin key; delete_user also with the user's own key) -----------------------------

    create_user = Async(endpoints.create_user)
    users = Async(endpoints.users)
    create_key = Async(endpoints.create_key)
    keys = Async(endpoints.keys)
    revoke_key = Async(endpoints.revoke_key)
    delete_user = Async(endpoints.delete_user)

    # -- retention (the admin key; retention(user) also with the user's own key) ------------------------------

    set_retention = Async(endpoints.set_retention)
    retention = Async(endpoints.retention)
    retention_policies = Async(endpoints.retention_policies)
    apply_retention = Async(endpoints.apply_retention)

    # -- operations -------------------------------------------------------------------------------------------

    health = Async(endpoints.health)
    metrics = Async(endpoints.metrics)

    # -- plumbing --------------------------------------------------------------------------------------------

    async def _perform(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, json=call.json, params=call.params)
        except httpx.TransportError as exc:
            raise TransportError(f"{call.method} {call.path}: {type(exc).__name__}: {exc}") from exc
        return call.read(response)
