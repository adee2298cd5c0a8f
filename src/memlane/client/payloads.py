"""The request side of the HTTP clients, shared by :class:`Client` and :class:`AsyncClient`: paths, bodies
and query parameters (the response side is in :mod:`memlane.client.models`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any
from urllib.parse import quote

from memlane.core.model import Filters
from memlane.core.retention import RetentionPolicy

TimeArg = datetime | str | float | None
# An argument left out of an update (None is a value there: it clears).
KEEP: Any = object()
# A registry prompt to extract with: (prompt id, version), the version None for its current one.
PromptArg = tuple[str, int | None] | None


def time_value(value: TimeArg) -> str | float | None:
    return value.isoformat() if isinstance(value, datetime) else value


def drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def segment(value: str) -> str:
    """A path segment, percent-encoded, so that a block id or user name never escapes its segment."""
    quoted = quote(value, safe="")
    # "." and ".." would be dot segments that an HTTP stack may normalise away.
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def add_body(
    messages: Sequence[Mapping[str, Any]],
    conversation_id: str,
    session_id: str,
    time: TimeArg,
    perspective: str,
    extract: str,
    annotations: Mapping[str, str] | None = None,
    ttl_s: int | None = None,
    prompt: PromptArg = None,
) -> dict[str, Any]:
    return drop_none(
        {
            "messages": [drop_none({**m, "time": time_value(m.get("time"))}) for m in messages],
            "conversation_id": conversation_id,
            "session_id": session_id,
            "time": time_value(time),
            "perspective": perspective,
            "extract": extract,
            "annotations": None if annotations is None else dict(annotations),
            "ttl_s": ttl_s,
            "prompt": prompt_body(prompt),
        }
    )


def search_body(
    query: str,
    k: int,
    mode: str,
    before: TimeArg,
    after: TimeArg,
    at: TimeArg,
    filters: Filters | None = None,
    explain: bool = False,
) -> dict[str, Any]:
    return drop_none(
        {
            "query": query,
            "k": k,
            "mode": mode,
            "before": time_value(before),
            "after": time_value(after),
            "at": time_value(at),
            "explain": True if explain else None,
            **filters_body(filters),
        }
    )


def filters_body(filters: Filters | None) -> dict[str, Any]:
    """The filter fields of a search or browse body (none for no filters)."""
    if filters is None:
        return {}
    return drop_none(
        {
            "sessions": None if filters.sessions is None else list(filters.sessions),
            "block_ids": None if filters.block_ids is None else list(filters.block_ids),
            "annotations": dict(filters.annotations) or None,
            "annotation_filter": "post" if filters.annotations_after_cut else None,
            "kinds": None if filters.kinds is None else sorted(k.value for k in filters.kinds),
            "ingested_after": time_value(filters.ingested_after),
            "ingested_before": time_value(filters.ingested_before),
            "prompt_id": filters.prompt_id,
            "prompt_version": filters.prompt_version,
        }
    )


def browse_body(
    filters: Filters | None, order: str, limit: int, offset: int, before: TimeArg, after: TimeArg
) -> dict[str, Any]:
    return drop_none(
        {
            **filters_body(filters),
            "order": order,
            "limit": limit,
            "offset": offset,
            "before": time_value(before),
            "after": time_value(after),
        }
    )


def prompt_body(prompt: PromptArg) -> dict[str, Any] | None:
    return None if prompt is None else {"prompt_id": prompt[0], "version": prompt[1]}


def write_body(
    session_id: str,
    conversation_id: str,
    time: TimeArg,
    annotations: Mapping[str, str] | None,
    ttl_s: int | None,
    prompt: PromptArg,
    extract: str,
) -> dict[str, Any]:
    """What a write of facts or exchanges takes beside its content."""
    return drop_none(
        {
            "session_id": session_id,
            "conversation_id": conversation_id,
            "time": time_value(time),
            "annotations": None if annotations is None else dict(annotations),
            "ttl_s": ttl_s,
            "prompt": prompt_body(prompt),
            "extract": extract,
        }
    )


def update_body(
    content: str | None,
    sides: tuple[str, str] | None,
    annotations: Mapping[str, str] | None,
    ttl_s: int | None,
    prompt: PromptArg,
    extract: str | None,
) -> dict[str, Any]:
    return drop_none(
        {
            "content": content,
            "user_content": None if sides is None else sides[0],
            "assistant_content": None if sides is None else sides[1],
            "annotations": None if annotations is None else dict(annotations),
            "ttl_s": ttl_s,
            "prompt": prompt_body(prompt),
            "extract": extract,
        }
    )


def session_body(
    session_id: str,
    conversation_id: str,
    started_at: TimeArg,
    annotations: Mapping[str, str] | None,
    metadata: Mapping[str, Any] | None,
    default_ttl_s: int | None,
    exist_ok: bool,
) -> dict[str, Any]:
    return drop_none(
        {
            "session_id": session_id,
            "conversation_id": conversation_id,
            "started_at": time_value(started_at),
            "annotations": None if annotations is None else dict(annotations),
            "metadata": None if metadata is None else dict(metadata),
            "default_ttl_s": default_ttl_s,
            "exist_ok": exist_ok,
        }
    )


def users_params(
    name: str | None, metadata: Mapping[str, str] | None, limit: int, offset: int, contains: str | None = None
) -> dict[str, Any]:
    pairs = None if not metadata else [f"{k}={v}" for k, v in metadata.items()]
    return drop_none({"name": name, "q": contains, "metadata": pairs, "limit": limit, "offset": offset})


def list_params(conversation_id: str | None, session_id: str | None, limit: int, offset: int) -> dict[str, Any]:
    return drop_none({"conversation_id": conversation_id, "session_id": session_id, "limit": limit, "offset": offset})


def retention_path(user: str | None) -> str:
    """Where the default policy (``user`` None) or a user's own lives."""
    return "/v1/retention/default" if user is None else f"/v1/users/{segment(user)}/retention"


def policy_body(policy: RetentionPolicy) -> dict[str, Any]:
    return drop_none(asdict(policy))


def apply_body(at: TimeArg, user: str | None, dry_run: bool) -> dict[str, Any]:
    return drop_none({"at": time_value(at), "user": user, "dry_run": dry_run})


def requeue_body(user: str | None, since: TimeArg, block_ids: Sequence[str] | None, dead_only: bool) -> dict[str, Any]:
    ids = None if block_ids is None else list(block_ids)
    return drop_none({"user": user, "since": time_value(since), "block_ids": ids, "dead_only": dead_only})


def user_body(
    user: str, display_name: str | None, metadata: Mapping[str, Any] | None, exist_ok: bool
) -> dict[str, Any]:
    body = drop_none(
        {"user": user, "display_name": display_name, "metadata": None if metadata is None else dict(metadata)}
    )
    if exist_ok:
        body["exist_ok"] = True
    return body


def user_update_body(display_name: str | None, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if display_name is not KEEP:
        body["display_name"] = display_name
    if metadata is not KEEP:
        body["metadata"] = None if metadata is None else dict(metadata)
    return body
