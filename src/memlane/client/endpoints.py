"""The calls of the HTTP service, each written once for :class:`~memlane.client.Client` and
:class:`~memlane.client.AsyncClient`: its parameters and docstring, the request it sends and how its response
becomes its value or error. The two clients differ only in the transport (``httpx.Client`` or
``httpx.AsyncClient``): ``add = Sync(endpoints.add)`` and ``add = Async(endpoints.add)`` make the method
(the bodies and paths themselves are built in :mod:`memlane.client.payloads`)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import httpx

from memlane.client.calls import Call, call, checked, each_of, error, field_of, no_body, page_of
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

# -- memories (a user's key) ---------------------------------------------------------------------------------


def add(
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
) -> Call[AddResult]:
    """Store messages (``{"role", "content", "time"?, "id"?}``, or ``{"speaker", "content", ...}`` for a chat
    between two people) as blocks; see :meth:`Memory.add` (``annotations``: string labels kept on every block)."""
    body = add_body(messages, conversation_id, session_id, time, perspective, extract, annotations, ttl_s, prompt)
    return call("POST", "/v1/memories", add_result_from_json, json=body)


def search(
    query: str,
    k: int = 10,
    *,
    mode: str = "hybrid",
    before: TimeArg = None,
    after: TimeArg = None,
    at: TimeArg = None,
    filters: Filters | None = None,
    explain: bool = False,
) -> Call[builtins.list[Hit]]:
    """The top-k blocks for ``query``; see :meth:`Memory.search` (``at``: when the question is asked)."""
    body = search_body(query, k, mode, before, after, at, filters, explain)
    return call("POST", "/v1/search", each_of(hit_from_json), json=body)


def get(block_id: str) -> Call[MemoryBlock]:
    """One block; NotFoundError if it is not the key's user's."""
    return call("GET", f"/v1/memories/{_segment(block_id)}", block_from_json)


def list_blocks(
    *,
    conversation_id: str | None = None,
    session_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> Call[builtins.list[MemoryBlock]]:
    """The blocks in event-time order."""
    params = list_params(conversation_id, session_id, limit, offset)
    return call("GET", "/v1/memories", each_of(block_from_json), params=params)


def delete(block_id: str) -> Call[None]:
    """Delete one block."""
    return call("DELETE", f"/v1/memories/{_segment(block_id)}", no_body)


def queue_status() -> Call[QueueStatus]:
    """The extraction queue (a user's key sees only its own errors)."""
    return call("GET", "/v1/queue", queue_from_json)


def requeue(
    *,
    user: str | None = None,
    since: TimeArg = None,
    block_ids: Sequence[str] | None = None,
    dead_only: bool = True,
) -> Call[Requeued]:
    """Run failed extraction jobs again, as :meth:`memlane.core.memory.Memory.requeue` (admin key)."""
    return call("POST", "/v1/queue/retry", requeued_from_json, json=requeue_body(user, since, block_ids, dead_only))


def add_facts(
    facts: Sequence[str],
    *,
    session_id: str = "default",
    conversation_id: str = "default",
    time: TimeArg = None,
    annotations: Mapping[str, str] | None = None,
    ttl_s: int | None = None,
    prompt: PromptArg = None,
    extract: Literal["off", "async", "sync"] = "off",
) -> Call[AddResult]:
    """Store standalone facts, one block of kind ``fact`` each; see :meth:`Memory.add_facts`."""
    body = {
        "facts": builtins.list(facts),
        **write_body(session_id, conversation_id, time, annotations, ttl_s, prompt, extract),
    }
    return call("POST", "/v1/facts", add_result_from_json, json=body)


def add_exchanges(
    pairs: Sequence[tuple[str, str]],
    *,
    session_id: str = "default",
    conversation_id: str = "default",
    time: TimeArg = None,
    annotations: Mapping[str, str] | None = None,
    ttl_s: int | None = None,
    prompt: PromptArg = None,
    extract: Literal["off", "async", "sync"] = "off",
) -> Call[AddResult]:
    """Store exchanges given as (user_content, assistant_content), one block each with its two sides kept;
    see :meth:`Memory.add_exchanges`."""
    exchanges = [{"user_content": u, "assistant_content": a} for u, a in pairs]
    body = {
        "exchanges": exchanges,
        **write_body(session_id, conversation_id, time, annotations, ttl_s, prompt, extract),
    }
    return call("POST", "/v1/exchanges", add_result_from_json, json=body)


def update(
    block_id: str,
    *,
    content: str | None = None,
    sides: tuple[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    ttl_s: int | None = None,
    prompt: PromptArg = None,
    extract: Literal["off", "async"] | None = None,
) -> Call[MemoryBlock]:
    """Update a block in place (same id): a fact's ``content`` or an exchange's ``sides``, its annotations
    (replaced), its TTL (from now); see :meth:`Memory.update`."""
    body = update_body(content, sides, annotations, ttl_s, prompt, extract)
    return call("PATCH", f"/v1/memories/{_segment(block_id)}", block_from_json, json=body)


def set_ttl(ttl_s: int, *, session_id: str | None = None, block_ids: Sequence[str] | None = None) -> Call[int]:
    """A new TTL from now for all the blocks, one session's or the listed ones; how many changed."""
    body = drop_none(
        {"ttl_s": ttl_s, "session_id": session_id, "block_ids": None if block_ids is None else builtins.list(block_ids)}
    )
    return call("POST", "/v1/memories/ttl", field_of("changed", int), json=body)


def browse(
    filters: Filters | None = None,
    *,
    order: Literal["ingested", "event"] = "ingested",
    limit: int = 100,
    offset: int = 0,
    before: TimeArg = None,
    after: TimeArg = None,
) -> Call[Page[MemoryBlock]]:
    """The query-less search: every block that passes ``filters``, newest first, a page with the total."""
    body = browse_body(filters, order, limit, offset, before, after)
    return call("POST", "/v1/browse", page_of(block_from_json), json=body)


def requeue_block(block_id: str) -> Call[MemoryBlock]:
    """Queue a failed block's extraction again."""
    return call("POST", f"/v1/memories/{_segment(block_id)}/requeue", block_from_json)


# -- sessions (a user's key) ---------------------------------------------------------------------------------


def create_session(
    session_id: str,
    *,
    conversation_id: str = "default",
    started_at: TimeArg = None,
    annotations: Mapping[str, str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    default_ttl_s: int | None = None,
    exist_ok: bool = False,
) -> Call[Session]:
    """Start a session; AlreadyExistsError if it exists, unless ``exist_ok``."""
    body = session_body(session_id, conversation_id, started_at, annotations, metadata, default_ttl_s, exist_ok)
    return call("POST", "/v1/sessions", session_from_json, json=body)


def get_session(session_id: str) -> Call[Session]:
    return call("GET", f"/v1/sessions/{_segment(session_id)}", session_from_json)


def list_sessions(*, limit: int = 100, offset: int = 0) -> Call[Page[Session]]:
    """The sessions, the latest started first."""
    params = {"limit": limit, "offset": offset}
    return call("GET", "/v1/sessions", page_of(session_from_json), params=params)


def update_session(
    session_id: str,
    *,
    annotations: Mapping[str, str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    default_ttl_s: int | None = None,
) -> Call[Session]:
    """Replace what is given; SessionEndedError once it has ended."""
    body = drop_none(
        {
            "annotations": None if annotations is None else dict(annotations),
            "metadata": None if metadata is None else dict(metadata),
            "default_ttl_s": default_ttl_s,
        }
    )
    return call("PATCH", f"/v1/sessions/{_segment(session_id)}", session_from_json, json=body)


def end_session(session_id: str, *, at: TimeArg = None) -> Call[Session]:
    """End the session (its blocks stay readable); SessionEndedError if it had ended."""
    body = drop_none({"at": time_value(at)})
    return call("POST", f"/v1/sessions/{_segment(session_id)}/end", session_from_json, json=body)


def delete_session(session_id: str) -> Call[int]:
    """Delete the session and its blocks; how many blocks went."""
    return call("DELETE", f"/v1/sessions/{_segment(session_id)}", field_of("blocks_deleted", int))


# -- the prompt registry (reads: any key; writes: the admin key) ---------------------------------------------


def create_prompt(
    prompt_id: str, text: str, *, description: str = "", annotations: Mapping[str, str] | None = None
) -> Call[Prompt]:
    """A new extraction prompt at version 0."""
    body = drop_none(
        {
            "prompt_id": prompt_id,
            "text": text,
            "description": description,
            "annotations": None if annotations is None else dict(annotations),
        }
    )
    return call("POST", "/v1/prompts", prompt_from_json, json=body)


def prompt(prompt_id: str) -> Call[Prompt]:
    return call("GET", f"/v1/prompts/{_segment(prompt_id)}", prompt_from_json)


def prompts(*, limit: int = 100, offset: int = 0, include_archived: bool = False) -> Call[Page[Prompt]]:
    params = {"limit": limit, "offset": offset, "include_archived": include_archived}
    return call("GET", "/v1/prompts", page_of(prompt_from_json), params=params)


def prompt_versions(prompt_id: str, *, limit: int = 100, offset: int = 0) -> Call[Page[PromptVersion]]:
    path = f"/v1/prompts/{_segment(prompt_id)}/versions"
    return call("GET", path, page_of(prompt_version_from_json), params={"limit": limit, "offset": offset})


def prompt_version(prompt_id: str, version: int) -> Call[PromptVersion]:
    path = f"/v1/prompts/{_segment(prompt_id)}/versions/{int(version)}"
    return call("GET", path, prompt_version_from_json)


def update_prompt(
    prompt_id: str,
    *,
    text: str | None = None,
    description: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Call[Prompt]:
    """New text adds a version that becomes current."""
    body = drop_none(
        {
            "text": text,
            "description": description,
            "annotations": None if annotations is None else dict(annotations),
        }
    )
    return call("PATCH", f"/v1/prompts/{_segment(prompt_id)}", prompt_from_json, json=body)


def archive_prompt(prompt_id: str, version: int | None = None) -> Call[None]:
    """Archive one version, or the whole prompt (its id stays reserved)."""
    return call("POST", f"/v1/prompts/{_segment(prompt_id)}/archive", no_body, json=drop_none({"version": version}))


def purge_prompt(prompt_id: str, version: int | None = None) -> Call[None]:
    """Purge one version, or the whole prompt (its id is free again)."""
    params = drop_none({"version": version})
    return call("DELETE", f"/v1/prompts/{_segment(prompt_id)}", no_body, params=params)


# -- users (the admin key; get_user and update_user also with the user's own key) ----------------------------


def get_user(user: str) -> Call[UserInfo]:
    return call("GET", f"/v1/users/{_segment(user)}", user_from_json)


def update_user(
    user: str, *, display_name: str | None = KEEP, metadata: Mapping[str, Any] | None = KEEP
) -> Call[UserInfo]:
    """Replace the display name and/or metadata given; one left out is kept (``display_name=None`` clears
    the name, ``metadata=None`` empties the metadata)."""
    body = user_update_body(display_name, metadata)
    return call("PATCH", f"/v1/users/{_segment(user)}", user_from_json, json=body)


def list_users(
    *,
    name: str | None = None,
    metadata: Mapping[str, str] | None = None,
    limit: int = 100,
    offset: int = 0,
    contains: str | None = None,
) -> Call[Page[UserInfo]]:
    """The users with the exact display name ``name``, every ``metadata`` pair, and ``contains`` in their
    name or display name (any case), a page with the total."""

    def read(response: httpx.Response) -> Page[UserInfo]:
        response = checked(response)
        users = [user_from_json(u) for u in response.json()]
        return Page(items=users, total=int(response.headers["X-Total-Count"]), limit=limit, offset=offset)

    return Call("GET", "/v1/users", read, params=users_params(name, metadata, limit, offset, contains))


# -- users and keys (the admin key; delete_user also with the user's own key) --------------------------------


def create_user(
    user: str,
    *,
    display_name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    exist_ok: bool = False,
) -> Call[bool]:
    """Create a user (True); an existing user is AlreadyExistsError, or with ``exist_ok`` False (left as it is)."""
    body = user_body(user, display_name, metadata, exist_ok)
    return call("POST", "/v1/users", field_of("created", bool), json=body)


def users() -> Call[builtins.list[UserInfo]]:
    return call("GET", "/v1/users", each_of(user_from_json))


def create_key(user: str, label: str = "") -> Call[NewKey]:
    """A new API key for ``user``; its secret is in the result only."""
    return call("POST", f"/v1/users/{_segment(user)}/keys", new_key_from_json, json={"label": label})


def keys(user: str) -> Call[builtins.list[KeyInfo]]:
    return call("GET", f"/v1/users/{_segment(user)}/keys", each_of(key_from_json))


def revoke_key(user: str, key_id: str) -> Call[None]:
    return call("DELETE", f"/v1/users/{_segment(user)}/keys/{_segment(key_id)}", no_body)


def delete_user(user: str) -> Call[UserDeleted]:
    """Delete the user and everything of theirs, keys included."""
    return call("DELETE", f"/v1/users/{_segment(user)}", deleted_from_json)


# -- retention (the admin key; retention(user) also with the user's own key) ---------------------------------


def set_retention(user: str | None, policy: RetentionPolicy | None) -> Call[None]:
    """Set the default policy (``user`` None) or a user's own; ``policy`` None removes it."""
    path = retention_path(user)
    if policy is None:
        return call("DELETE", path, no_body)
    return call("PUT", path, no_body, json=policy_body(policy))


def retention(user: str) -> Call[tuple[RetentionPolicy | None, str]]:
    """The policy that applies to ``user`` and its source: ``"user"``, ``"default"`` or ``"none"``."""
    return call("GET", retention_path(user), user_policy_from_json)


def retention_policies() -> Call[Policies]:
    return call("GET", "/v1/retention", policies_from_json)


def apply_retention(*, at: TimeArg = None, user: str | None = None, dry_run: bool = False) -> Call[RetentionReport]:
    """Sweep now (one user or all); ``dry_run`` only counts."""
    return call("POST", "/v1/retention/apply", report_from_json, json=apply_body(at, user, dry_run))


# -- operations ----------------------------------------------------------------------------------------------


def health() -> Call[Health]:
    """``/healthz``; an unhealthy server answers too (``ok`` False) rather than raising."""

    def read(response: httpx.Response) -> Health:
        if response.status_code not in (200, 503):
            raise error(response)
        return health_from_json(response.json())

    return Call("GET", "/healthz", read)


def metrics() -> Call[str]:
    """The Prometheus exposition text (admin key)."""
    return Call("GET", "/metrics", lambda response: checked(response).text)


# -- the two clients' methods --------------------------------------------------------------------------------
