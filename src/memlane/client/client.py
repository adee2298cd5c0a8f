"""The synchronous Python client of the HTTP service, on httpx.

>>> from memlane.client import Client
>>> mem = Client("http://127.0.0.1:8420", api_key="mlk_...")            # doctest: +SKIP
>>> mem.add([{"role": "user", "content": "I moved to Ghent."}], time="2023-05-08 13:56")  # doctest: +SKIP
>>> [h.block.message for h in mem.search("where do I live?", k=3)]      # doctest: +SKIP

It mirrors :class:`~memlane.core.memory.Memory` without the ``user`` argument: the server takes the user
from the key. With the admin key the same client manages users and keys. Methods return the core's value
types (:class:`~memlane.core.model.Hit`, :class:`~memlane.core.model.MemoryBlock`, ...) and raise the
errors of :mod:`memlane.client.errors`.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import httpx

from memlane.client.errors import APIError, TransportError, error_from_response
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

DEFAULT_TIMEOUT_S = 30.0


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
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, transport=transport, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- memories (a user's key) -----------------------------------------------------------------------------

    def add(
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
        """Store messages (``{"role", "content", "time"?, "id"?}``, or ``{"speaker", "content", ...}`` for a chat
        between two people) as blocks; see :meth:`Memory.add` (``annotations``: string labels kept on every block)."""
        body = add_body(messages, conversation_id, session_id, time, perspective, extract, annotations)
        return add_result_from_json(self._call("POST", "/v1/memories", json=body))

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: str = "hybrid",
        before: TimeArg = None,
        after: TimeArg = None,
        at: TimeArg = None,
    ) -> list[Hit]:
        """The top-k blocks for ``query``; see :meth:`Memory.search` (``at``: when the question is asked)."""
        body = search_body(query, k, mode, before, after, at)
        return [hit_from_json(h) for h in self._call("POST", "/v1/search", json=body)]

    def get(self, block_id: str) -> MemoryBlock:
        """One block; NotFoundError if it is not the key's user's."""
        return block_from_json(self._call("GET", f"/v1/memories/{_segment(block_id)}"))

    def list(
        self,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[MemoryBlock]:
        """The blocks in event-time order."""
        params = list_params(conversation_id, session_id, limit, offset)
        return [block_from_json(b) for b in self._call("GET", "/v1/memories", params=params)]

    def delete(self, block_id: str) -> None:
        """Delete one block."""
        self._call("DELETE", f"/v1/memories/{_segment(block_id)}")

    def queue_status(self) -> QueueStatus:
        """The extraction queue (a user's key sees only its own errors)."""
        return queue_from_json(self._call("GET", "/v1/queue"))

    def requeue(
        self,
        *,
        user: str | None = None,
        since: TimeArg = None,
        block_ids: Sequence[str] | None = None,
        dead_only: bool = True,
    ) -> Requeued:
        """Run failed extraction jobs again, as :meth:`memlane.core.memory.Memory.requeue` (admin key)."""
        return requeued_from_json(
            self._call("POST", "/v1/queue/retry", json=requeue_body(user, since, block_ids, dead_only))
        )

    # -- users and keys (the admin key; delete_user also with the user's own key) ----------------------------

    def create_user(self, user: str) -> bool:
        """Create a user; False if it already existed."""
        return bool(self._call("POST", "/v1/users", json={"user": user})["created"])

    def users(self) -> builtins.list[UserInfo]:
        return [user_from_json(u) for u in self._call("GET", "/v1/users")]

    def create_key(self, user: str, label: str = "") -> NewKey:
        """A new API key for ``user``; its secret is in the result only."""
        return new_key_from_json(self._call("POST", f"/v1/users/{_segment(user)}/keys", json={"label": label}))

    def keys(self, user: str) -> builtins.list[KeyInfo]:
        return [key_from_json(k) for k in self._call("GET", f"/v1/users/{_segment(user)}/keys")]

    def revoke_key(self, user: str, key_id: str) -> None:
        self._call("DELETE", f"/v1/users/{_segment(user)}/keys/{_segment(key_id)}")

    def delete_user(self, user: str) -> UserDeleted:
        """Delete the user and everything of theirs, keys included."""
        return deleted_from_json(self._call("DELETE", f"/v1/users/{_segment(user)}"))

    # -- retention (the admin key; retention(user) also with the user's own key) -----------------------------

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """Set the default policy (``user`` None) or a user's own; ``policy`` None removes it."""
        path = retention_path(user)
        if policy is None:
            self._call("DELETE", path)
        else:
            self._call("PUT", path, json=policy_body(policy))

    def retention(self, user: str) -> tuple[RetentionPolicy | None, str]:
        """The policy that applies to ``user`` and its source: ``"user"``, ``"default"`` or ``"none"``."""
        return user_policy_from_json(self._call("GET", retention_path(user)))

    def retention_policies(self) -> Policies:
        return policies_from_json(self._call("GET", "/v1/retention"))

    def apply_retention(self, *, at: TimeArg = None, user: str | None = None, dry_run: bool = False) -> RetentionReport:
        """Sweep now (one user or all); ``dry_run`` only counts."""
        body = apply_body(at, user, dry_run)
        return report_from_json(self._call("POST", "/v1/retention/apply", json=body))

    # -- operations ------------------------------------------------------------------------------------------

    def health(self) -> Health:
        """``/healthz``; an unhealthy server answers too (``ok`` False) rather than raising."""
        response = self._send("GET", "/healthz")
        if response.status_code not in (200, 503):
            raise _error(response)
        return health_from_json(response.json())

    def metrics(self) -> str:
        """The Prometheus exposition text (admin key)."""
        return self._checked(self._send("GET", "/metrics")).text

    # -- plumbing --------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        response = self._checked(self._send(method, path, **kw))
        return None if response.status_code == 204 else response.json()

    def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _checked(response: httpx.Response) -> httpx.Response:
        if response.is_success:
            return response
        raise _error(response)


def _error(response: httpx.Response) -> Exception:
    try:
        err = response.json()["error"]
        code, message, field = str(err["code"]), str(err["message"]), err.get("field")
    except (ValueError, KeyError, TypeError):
        return APIError(f"HTTP {response.status_code}: {response.text[:200]}", status=response.status_code)
    return error_from_response(response.status_code, code, message, field)
