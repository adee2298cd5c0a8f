"""The JSON shape of a memory block and of a search hit: ``memlane ... --json``, the HTTP API's bodies and
the MCP tools' results all print these same keys."""

from __future__ import annotations

from typing import Any

from memlane.core.model import Hit, MemoryBlock


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
    }


def hit_json(h: Hit) -> dict[str, Any]:
    return {
        **block_json(h.block),
        "score": h.score,
        "score_kind": h.score_kind,
        "ranks": h.ranks,
        "other_perspectives": list(h.other_perspectives),
        "superseded_by": list(h.superseded_by),
    }
