"""The block row both backends select, and its decoding: one definition, whatever the SQL dialect."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from memlane.core.errors import NotFoundError
from memlane.core.model import BlockKind, ExtractionStatus, MemoryBlock, PerspectiveMode
from memlane.core.timefmt import from_epoch

BLOCK_COLUMNS = (
    "b.pk, b.id, u.name, b.conversation_id, b.session_id, b.exchange_index, b.perspective, b.mode, b.message, "
    "b.summary, b.contexts, b.message_ids, b.event_ts, b.ingest_ts, b.time_annotation, b.extraction_status, "
    "b.extraction_prompt, b.content_hash, b.annotations"
)
# The memory model's columns (docs/design/007-memory-model.md), after BLOCK_COLUMNS: a store selects
# FULL_BLOCK_COLUMNS once its schema has them; row_to_block reads either.
MODEL_COLUMNS = (
    "b.kind, b.sides, b.ttl_s, b.expires_ts, b.updated_ts, b.prompt_id, b.prompt_version, b.fail_count, "
    "b.last_queued_ts"
)
FULL_BLOCK_COLUMNS = f"{BLOCK_COLUMNS}, {MODEL_COLUMNS}"


def _epoch_or_none(value: Any) -> Any:
    return None if value is None else from_epoch(float(value))


def _json(value: Any) -> Any:
    # SQLite hands JSON columns back as text; PostgreSQL's jsonb arrives already decoded.
    return json.loads(value) if isinstance(value, str | bytes) else value


def row_to_block(r: Sequence[Any]) -> MemoryBlock:
    """A row of :data:`BLOCK_COLUMNS` as a block (its first column, the internal pk, is not part of it)."""
    (_, bid, user, conv, sess, idx, persp, mode, msg, summary, contexts, mids, ev, ing, ann, status, prompt, h) = r[:18]
    model: dict[str, Any] = {}
    if len(r) > 19:
        kind, sides, ttl, expires, updated, prompt_id, prompt_version, fails, queued = r[19:28]
        model = {
            "kind": BlockKind(kind),
            "sides": tuple((str(role), str(text)) for role, text in _json(sides)),
            "ttl_s": None if ttl is None else int(ttl),
            "expires_at": _epoch_or_none(expires),
            "updated_at": _epoch_or_none(updated),
            "prompt_id": None if prompt_id is None else str(prompt_id),
            "prompt_version": None if prompt_version is None else int(prompt_version),
            "fail_count": int(fails),
            "last_queued_at": _epoch_or_none(queued),
        }
    return MemoryBlock(
        id=str(bid),
        user=str(user),
        conversation_id=str(conv),
        session_id=str(sess),
        exchange_index=int(idx),
        perspective=str(persp),
        mode=PerspectiveMode(mode),
        message=str(msg),
        summary=None if summary is None else str(summary),
        contexts=tuple(str(c) for c in _json(contexts)),
        message_ids=tuple(str(m) for m in _json(mids)),
        event_time=from_epoch(float(ev)),
        ingest_time=from_epoch(float(ing)),
        time_annotation=str(ann),
        extraction_status=ExtractionStatus(status),
        extraction_prompt=None if prompt is None else str(prompt),
        content_hash=str(h),
        annotations={str(k): str(v) for k, v in dict(_json(r[18])).items()},
        **model,
    )


def found_blocks(rows: Sequence[Sequence[Any]], user: str, block_id: str) -> list[MemoryBlock]:
    """The blocks of the rows a read by ``block_id`` found; NotFoundError if it found none (the block is not
    the user's, or has expired)."""
    if not rows:
        raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
    return [row_to_block(r) for r in rows]


EXCHANGE_JOIN = (
    "JOIN blocks b ON b.user_id = x.user_id AND b.conversation_id = x.conversation_id "
    "AND b.session_id = x.session_id AND b.exchange_index = x.exchange_index"
)
"""Joins a block ``x`` to the blocks ``b`` at its exchange's place (conversation, session, exchange index),
through the user's index of exchanges; a read keeps those of ``x``'s own add (same ingest time and content
hash)."""


def continue_sessions(blocks: Sequence[MemoryBlock], last_index: Callable[[str, str], int | None]) -> list[MemoryBlock]:
    """The blocks of one write with their exchange indexes continued from their session's last exchange.

    An add numbers its exchanges from 0; the store, inside the write's transaction (so no other write of the
    user comes between the read and the insert), adds one more than the highest index the session already
    holds (``last_index(conversation, session)``, None for a new session). So (conversation, session,
    exchange_index) names one exchange, and neighbouring exchanges are neighbours in time, however many adds
    a session took. A session written in one add keeps its indexes as they are."""
    bases: dict[tuple[str, str], int] = {}
    out = []
    for b in blocks:
        place = (b.conversation_id, b.session_id)
        if place not in bases:
            last = last_index(*place)
            bases[place] = 0 if last is None else last + 1
        out.append(replace(b, exchange_index=bases[place] + b.exchange_index) if bases[place] else b)
    return out
