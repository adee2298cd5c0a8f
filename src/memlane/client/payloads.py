"""The request side of the HTTP clients, shared by :class:`Client` and :class:`AsyncClient`: paths, bodies
and query parameters (the response side is in :mod:`memlane.client.models`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any
from urllib.parse import quote

from memlane.core.retention import RetentionPolicy

TimeArg = datetime | str | float | None


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
        }
    )


def search_body(query: str, k: int, mode: str, before: TimeArg, after: TimeArg, at: TimeArg) -> dict[str, Any]:
    return drop_none(
        {
            "query": query,
            "k": k,
            "mode": mode,
            "before": time_value(before),
            "after": time_value(after),
            "at": time_value(at),
        }
    )


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
