"""The JSON shape of a memory block and of a search hit: ``memlane ... --json``, the HTTP API's bodies and
the MCP tools' results all print these same keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memlane.core.model import Explanation, Hit, KeyRecord, MemoryBlock, Page, Prompt, PromptVersion, Session, UserInfo


def iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def block_json(b: MemoryBlock) -> dict[str, Any]:
    return {
        "block_id": b.id,
        "user": b.user,
        "conversation_id": b.conversation_id,
        "session_id": b.session_id,
        "exchange_index": b.exchange_index,
        "perspective": b.perspective,
        "mode": b.mode.value,
        "message": b.message,
        "summary": b.summary,
        "facts": list(b.contexts),
        "time": b.event_time.isoformat(),
        "time_annotation": b.time_annotation,
        "ingest_time": b.ingest_time.isoformat(),
        "extraction_status": b.extraction_status.value,
        "message_ids": list(b.message_ids),
        "content_hash": b.content_hash,
        "annotations": b.annotations,
        "kind": b.kind.value,
        "sides": [{"role": role, "content": content} for role, content in b.sides],
        "ttl_s": b.ttl_s,
        "expires_at": iso(b.expires_at),
        "updated_at": iso(b.updated_at),
        "prompt_id": b.prompt_id,
        "prompt_version": b.prompt_version,
        "status": b.status,
        "fail_count": b.fail_count,
        "last_queued_at": iso(b.last_queued_at),
    }


def hit_json(h: Hit) -> dict[str, Any]:
    return {
        **block_json(h.block),
        "score": h.score,
        "score_kind": h.score_kind,
        "ranks": h.ranks,
        "other_perspectives": list(h.other_perspectives),
        "superseded_by": list(h.superseded_by),
        "supersedes": list(h.supersedes),
        "explanation": None if h.explanation is None else explanation_json(h.explanation),
    }


def explanation_json(e: Explanation) -> dict[str, Any]:
    return {
        "retrievers": [
            {"retriever": p.retriever, "rank": p.rank, "score": p.score, "margin": p.margin} for p in e.retrievers
        ],
        "fused": e.fused,
        "session_gain": e.session_gain,
        "neighbour_gain": e.neighbour_gain,
        "words_gain": e.words_gain,
        "time_gain": e.time_gain,
        "time_phrases": list(e.time_phrases),
        "supersedes": list(e.supersedes),
    }


def key_json(k: KeyRecord) -> dict[str, Any]:
    """An API key without its secret, as ``GET /v1/users/{user}/keys`` and ``memlane keys list`` give it."""
    return {
        "key_id": k.key_id,
        "user": k.user,
        "label": k.label,
        "created_at": datetime.fromtimestamp(k.created_at, tz=UTC).isoformat(),
        "role": k.role,
    }


def user_json(u: UserInfo) -> dict[str, Any]:
    return {
        "user": u.name,
        "blocks": u.blocks,
        "created_at": u.created_at.isoformat(),
        "display_name": u.display_name,
        "metadata": u.metadata,
        "sessions": u.sessions,
        "last_activity": iso(u.last_activity),
    }


def session_json(s: Session) -> dict[str, Any]:
    return {
        "user": s.user,
        "session_id": s.session_id,
        "conversation_id": s.conversation_id,
        "started_at": s.started_at.isoformat(),
        "ended_at": iso(s.ended_at),
        "ended": s.ended,
        "annotations": s.annotations,
        "metadata": s.metadata,
        "default_ttl_s": s.default_ttl_s,
        "created_at": s.created_at.isoformat(),
        "blocks": s.blocks,
    }


def prompt_json(p: Prompt) -> dict[str, Any]:
    return {
        "prompt_id": p.prompt_id,
        "description": p.description,
        "annotations": p.annotations,
        "archived": p.archived,
        "current_version": p.current_version,
        "version_count": p.version_count,
        "updated_at": p.updated_at.isoformat(),
        "created_at": iso(p.created_at),
        "text": p.text,
    }


def prompt_version_json(v: PromptVersion) -> dict[str, Any]:
    return {
        "prompt_id": v.prompt_id,
        "version": v.version,
        "text": v.text,
        "created_at": v.created_at.isoformat(),
        "archived": v.archived,
        "is_current": v.is_current,
    }


def page_json(page: Page[Any], item: Any) -> dict[str, Any]:
    """A page as the HTTP API and ``--json`` print it: ``{"items", "total", "limit", "offset"}``."""
    return {"items": [item(x) for x in page.items], "total": page.total, "limit": page.limit, "offset": page.offset}
