"""The answers of the Agent Memory routes, built from the core's values (that API's field names).

Times are ISO 8601 in UTC; optional fields without a value are left out rather than sent as null, so a
client's defaults apply; a block's annotations are strings, its status one of ``processing``, ``ready``,
``extraction_failed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memlane.core.model import BlockKind, Hit, MemoryBlock, Page, Prompt, PromptVersion, Session, UserInfo


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def user_out(info: UserInfo, sessions: Sequence[str] | None = None) -> dict[str, Any]:
    """A user; ``sessions`` (its session ids) when the caller read them."""
    out: dict[str, Any] = {"id": info.name, "name": info.display_name or info.name, "metadata": dict(info.metadata)}
    if sessions is not None:
        out["sessions"] = list(sessions)
    return out


def session_out(s: Session) -> dict[str, Any]:
    out: dict[str, Any] = {
        "user_id": s.user,
        "session_id": s.session_id,
        "start_time": iso(s.started_at),
        "end_time": iso(s.ended_at) if s.ended_at is not None else None,
        "annotations": dict(s.annotations),
        "metadata": dict(s.metadata),
    }
    if s.default_ttl_s is not None:
        out["blocks_ttl"] = s.default_ttl_s
    return out


def message_of(block: MemoryBlock) -> dict[str, str]:
    """An exchange's two sides as given; a block written through memlane's own API (a message list)
    shows its text as the user's side."""
    user = next((c for r, c in block.sides if r == "user"), "")
    assistant = next((c for r, c in block.sides if r == "assistant"), "")
    if not (user.strip() or assistant.strip()):
        user = block.message
    return {"user_content": user, "assistant_content": assistant}


def block_out(block: MemoryBlock, rel_score: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "block_id": block.id,
        "user_id": block.user,
        "session_id": block.session_id,
        "ingested_at": iso(block.ingest_time),
        "created_at": iso(block.event_time),
        "fail_count": block.fail_count,
        "annotations": dict(block.annotations),
        "contexts": list(block.contexts),
        "status": block.status,
    }
    if block.kind is BlockKind.FACT:
        out["fact"] = block.message
    else:
        out["message"] = message_of(block)
    if block.summary is not None:
        out["summary"] = block.summary
    if block.last_queued_at is not None:
        out["last_queued_at"] = iso(block.last_queued_at)
    if block.prompt_id is not None:
        out["prompt_id"] = block.prompt_id
        if block.prompt_version is not None:
            out["prompt_vid"] = block.prompt_version
    if rel_score is not None:
        out["rel_score"] = rel_score
    return out


def hit_out(hit: Hit) -> dict[str, Any]:
    return block_out(hit.block, rel_score=round(float(hit.score), 6))


def page_fields(page: Page[Any], count: int) -> dict[str, Any]:
    return {"count": count, "total": page.total, "limit": page.limit, "offset": page.offset}


def prompt_out(p: Prompt) -> dict[str, Any]:
    return {
        "prompt_id": p.prompt_id,
        "prompt": p.text,
        "description": p.description,
        "current_vid": p.current_version,
        "version_count": p.version_count,
        "last_updated_at": iso(p.updated_at),
        "annotations": dict(p.annotations),
        "archived": p.archived,
    }


def version_out(v: PromptVersion) -> dict[str, Any]:
    return {
        "prompt_id": v.prompt_id,
        "vid": v.version,
        "prompt": v.text,
        "updated_at": iso(v.created_at),
        "archived": v.archived,
        "is_current": v.is_current,
    }
