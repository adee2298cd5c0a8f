"""The synchronous Python client of the HTTP service, on httpx.

>>> from memlane.client import Client
>>> mem = Client("http://127.0.0.1:8420", api_key="mlk_...")            # doctest: +SKIP
>>> mem.add([{"role": "user", "content": "I moved to Ghent."}], time="2023-05-08 13:56")  # doctest: +SKIP
>>> [h.block.message for h in mem.search("where do I live?", k=3)]      # doctest: +SKIP

It mirrors :class:`~memlane.core.memory.Memory` without the ``user`` argument: the server takes the user
from the key. With the admin key the same client manages users and keys. Methods return the core's value
types (:class:`~memlane.core.model.Hit`, :class:`~memlane.core.model.MemoryBlock`, ...) and raise the
errors of :mod:`memlane.client.errors`. Each method is an endpoint of :mod:`memlane.client.endpoints`, which
:class:`~memlane.client.AsyncClient` shares.
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

import httpx

from memlane.client import endpoints
from memlane.client.calls import Call, Sync, auth_headers
from memlane.client.errors import TransportError

DEFAULT_TIMEOUT_S = 30.0

T = TypeVar("T")


class Client:
    """A client of one memlane server with one key (a user's, or the admin's).

    ``transport`` replaces httpx's network transport (tests pass an in-process one). The client holds a
    connection pool: use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        headers = auth_headers(api_key)
        self._http = httpx.Client(base_url=base_url, headers=headers, transport=transport, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- memories (a user's key) ------------------------------------------------------------------------------

    add = Sync(endpoints.add)
    search = Sync(endpoints.search)
    get = Sync(endpoints.get)
    list = Sync(endpoints.list_blocks)
    delete = Sync(endpoints.delete)
    queue_status = Sync(endpoints.queue_status)
    requeue = Sync(endpoints.requeue)
    add_facts = Sync(endpoints.add_facts)
    add_exchanges = Sync(endpoints.add_exchanges)
    update = Sync(endpoints.update)
    set_ttl = Sync(endpoints.set_ttl)
    browse = Sync(endpoints.browse)
    requeue_block = Sync(endpoints.requeue_block)

    # -- sessions (a user's key) ------------------------------------------------------------------------------

    create_session = Sync(endpoints.create_session)
    get_session = Sync(endpoints.get_session)
    list_sessions = Sync(endpoints.list_sessions)
    update_session = Sync(endpoints.update_session)
    end_session = Sync(endpoints.end_session)
    delete_session = Sync(endpoints.delete_session)

    # -- the prompt registry (reads: any key; writes: the admin key) ------------------------------------------

    create_prompt = Sync(endpoints.create_prompt)
    prompt = Sync(endpoints.prompt)
    prompts = Sync(endpoints.prompts)
    prompt_versions = Sync(endpoints.prompt_versions)
    prompt_version = Sync(endpoints.prompt_version)
    update_prompt = Sync(endpoints.update_prompt)
    archive_prompt = Sync(endpoints.archive_prompt)
    purge_prompt = Sync(endpoints.purge_prompt)

    # -- users (the admin key; get_user and update_user also with the user's own key) -------------------------

    get_user = Sync(endpoints.get_user)
    update_user = Sync(endpoints.update_user)
    list_users = Sync(endpoints.list_users)

    # -- users and keys (the admin key; delete_user also with the user's own key) -----------------------------

    create_user = Sync(endpoints.create_user)
    users = Sync(endpoints.users)
    create_key = Sync(endpoints.create_key)
    keys = Sync(endpoints.keys)
    revoke_key = Sync(endpoints.revoke_key)
    delete_user = Sync(endpoints.delete_user)

    # -- retention (the admin key; retention(user) also with the user's own key) ------------------------------

    set_retention = Sync(endpoints.set_retention)
    retention = Sync(endpoints.retention)
    retention_policies = Sync(endpoints.retention_policies)
    apply_retention = Sync(endpoints.apply_retention)

    # -- operations -------------------------------------------------------------------------------------------

    health = Sync(endpoints.health)
    metrics = Sync(endpoints.metrics)

    # -- plumbing --------------------------------------------------------------------------------------------

    def _perform(self, call: Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, json=call.json, params=call.params)
        except httpx.TransportError as exc:
            raise TransportError(f"{call.method} {call.path}: {type(exc).__name__}: {exc}") from exc
        return call.read(response)
