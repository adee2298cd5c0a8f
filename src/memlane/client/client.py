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
        ttl_s: int | None = None,
        prompt: PromptArg = None,
    ) -> AddResult:
        """Store messages (``{"role", "content", "time"?, "id"?}``, or ``{"speaker", "content", ...}`` for a chat
        between two people) as blocks; see :meth:`Memory.add` (``annotations``: string labels kept on every block)."""
        body = add_body(messages, conversation_id, session_id, time, perspective, extract, annotations, ttl_s, prompt)
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
        filters: Filters | None = None,
        explain: bool = False,
    ) -> list[Hit]:
        """The top-k blocks for ``query``; see :meth:`Memory.search` (``at``: when the question is asked)."""
        body = search_body(query, k, mode, before, after, at, filters, explain)
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

    def add_facts(
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
        return add_result_from_json(self._call("POST", "/v1/facts", json=body))

    def add_exchanges(
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
        return add_result_from_json(self._call("POST", "/v1/exchanges", json=body))

    def update(
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
        return block_from_json(self._call("PATCH", f"/v1/memories/{_segment(block_id)}", json=body))

    def set_ttl(self, ttl_s: int, *, session_id: str | None = None, block_ids: Sequence[str] | None = None) -> int:
        """A new TTL from now for all the blocks, one session's or the listed ones; how many changed."""
        body = drop_none(
            {"ttl_s": ttl_s, "session_id": session_id, "block_ids": None if block_ids is None else list(block_ids)}
        )
        return int((self._call("POST", "/v1/memories/ttl", json=body))["changed"])

    def browse(
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
        return page_from_json(self._call("POST", "/v1/browse", json=body), block_from_json)

    def requeue_block(self, block_id: str) -> MemoryBlock:
        """Queue a failed block's extraction again."""
        return block_from_json(self._call("POST", f"/v1/memories/{_segment(block_id)}/requeue"))

    # -- sessions (a user's key) -----------------------------------------------------------------------------

    def create_session(
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
        return session_from_json(self._call("POST", "/v1/sessions", json=body))

    def get_session(self, session_id: str) -> Session:
        return session_from_json(self._call("GET", f"/v1/sessions/{_segment(session_id)}"))

    def list_sessions(self, *, limit: int = 100, offset: int = 0) -> Page[Session]:
        """The sessions, the latest started first."""
        params = {"limit": limit, "offset": offset}
        return page_from_json(self._call("GET", "/v1/sessions", params=params), session_from_json)

    def update_session(
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
        return session_from_json(self._call("PATCH", f"/v1/sessions/{_segment(session_id)}", json=body))

    def end_session(self, session_id: str, *, at: TimeArg = None) -> Session:
        """End the session (its blocks stay readable); SessionEndedError if it had ended."""
        body = drop_none({"at": time_value(at)})
        return session_from_json(self._call("POST", f"/v1/sessions/{_segment(session_id)}/end", json=body))

    def delete_session(self, session_id: str) -> int:
        """Delete the session and its blocks; how many blocks went."""
        return int((self._call("DELETE", f"/v1/sessions/{_segment(session_id)}"))["blocks_deleted"])

    # -- the prompt registry (reads: any key; writes: the admin key) -----------------------------------------

    def create_prompt(
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
        return prompt_from_json(self._call("POST", "/v1/prompts", json=body))

    def prompt(self, prompt_id: str) -> Prompt:
        return prompt_from_json(self._call("GET", f"/v1/prompts/{_segment(prompt_id)}"))

    def prompts(self, *, limit: int = 100, offset: int = 0, include_archived: bool = False) -> Page[Prompt]:
        params = {"limit": limit, "offset": offset, "include_archived": include_archived}
        return page_from_json(self._call("GET", "/v1/prompts", params=params), prompt_from_json)

    def prompt_versions(self, prompt_id: str, *, limit: int = 100, offset: int = 0) -> Page[PromptVersion]:
        path = f"/v1/prompts/{_segment(prompt_id)}/versions"
        return page_from_json(
            self._call("GET", path, params={"limit": limit, "offset": offset}), prompt_version_from_json
        )

    def prompt_version(self, prompt_id: str, version: int) -> PromptVersion:
        path = f"/v1/prompts/{_segment(prompt_id)}/versions/{int(version)}"
        return prompt_version_from_json(self._call("GET", path))

    def update_prompt(
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
        return prompt_from_json(self._call("PATCH", f"/v1/prompts/{_segment(prompt_id)}", json=body))

    def archive_prompt(self, prompt_id: str, version: int | None = None) -> None:
        """Archive one version, or the whole prompt (its id stays reserved)."""
        self._call("POST", f"/v1/prompts/{_segment(prompt_id)}/archive", json=drop_none({"version": version}))

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> None:
        """Purge one version, or the whole prompt (its id is free again)."""
        params = drop_none({"version": version})
        self._call("DELETE", f"/v1/prompts/{_segment(prompt_id)}", params=params)

    # -- users (the admin key; get_user and update_user also with the user's own key) ------------------------

    def get_user(self, user: str) -> UserInfo:
        return user_from_json(self._call("GET", f"/v1/users/{_segment(user)}"))

    def update_user(
        self, user: str, *, display_name: str | None = KEEP, metadata: Mapping[str, Any] | None = KEEP
    ) -> UserInfo:
        """Replace the display name and/or metadata given; one left out is kept (``display_name=None`` clears
        the name, ``metadata=None`` empties the metadata)."""
        body = user_update_body(display_name, metadata)
        return user_from_json(self._call("PATCH", f"/v1/users/{_segment(user)}", json=body))

    def list_users(
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
        params = users_params(name, metadata, limit, offset, contains)
        response = self._checked(self._send("GET", "/v1/users", params=params))
        users = [user_from_json(u) for u in response.json()]
        return Page(items=users, total=int(response.headers["X-Total-Count"]), limit=limit, offset=offset)

    # -- users and keys (the admin key; delete_user also with the user's own key) ----------------------------

    def create_user(
        self,
        user: str,
        *,
        display_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
    ) -> bool:
        """Create a user (True); an existing user is AlreadyExistsError, or with ``exist_ok`` False (left as it is)."""
        body = user_body(user, display_name, metadata, exist_ok)
        return bool(self._call("POST", "/v1/users", json=body)["created"])

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
