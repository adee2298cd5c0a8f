"""The PostgreSQL store's block rows with the memory model's columns (migration 7), the liveness rule every
read applies (a block whose TTL ran out is gone for reads at once, before any sweep), and the block filters
of a search or a browse (:class:`memlane.core.model.Filters`) as SQL over the ``blocks`` row ``b``."""

from __future__ import annotations

import json

from memlane.core.model import Filters, MemoryBlock
from memlane.core.store.rows import FULL_BLOCK_COLUMNS, row_to_block
from memlane.core.timefmt import now_utc, to_epoch

COLUMNS = FULL_BLOCK_COLUMNS
to_block = row_to_block

# A block is live until its expiry (NULL: never); every read of blocks has this in its WHERE clause.
LIVE = "(b.expires_ts IS NULL OR b.expires_ts > %(now)s)"


def now_epoch(now: float | None = None) -> float:
    """``now``, or the current time as epoch seconds (the clock the core decides expiries with)."""
    return to_epoch(now_utc()) if now is None else now


def sides_json(block: MemoryBlock) -> str:
    return json.dumps([list(s) for s in block.sides])


def filter_sql(filters: Filters | None, params: dict[str, object], *, annotations: bool = True) -> str:
    """The rules of ``filters`` over the row ``b`` as `` AND ...`` clauses (their values put in
    ``params``); with ``annotations`` False the annotation pairs are left out (checked after the cut)."""
    if filters is None:
        return ""
    sql = ""
    if filters.sessions is not None:
        sql += " AND b.session_id = ANY(%(f_sessions)s::text[])"
        params["f_sessions"] = list(filters.sessions)
    if filters.block_ids is not None:
        sql += " AND b.id = ANY(%(f_ids)s::text[])"
        params["f_ids"] = list(filters.block_ids)
    if annotations and filters.annotations:
        sql += " AND b.annotations @> %(f_ann)s::jsonb"
        params["f_ann"] = json.dumps(dict(filters.annotations))
    if filters.kinds is not None:
        sql += " AND b.kind = ANY(%(f_kinds)s::text[])"
        params["f_kinds"] = sorted(k.value for k in filters.kinds)
    if filters.ingested_after is not None:
        sql += " AND b.ingest_ts >= %(f_ing_after)s"
        params["f_ing_after"] = to_epoch(filters.ingested_after)
    if filters.ingested_before is not None:
        sql += " AND b.ingest_ts < %(f_ing_before)s"
        params["f_ing_before"] = to_epoch(filters.ingested_before)
    if filters.prompt_id is not None:
        sql += " AND b.prompt_id = %(f_prompt)s"
        params["f_prompt"] = filters.prompt_id
        if filters.prompt_version is not None:
            sql += " AND b.prompt_version = %(f_prompt_version)s"
            params["f_prompt_version"] = filters.prompt_version
    return sql


def restricts(filters: Filters | None) -> bool:
    """Whether ``filters`` (their pre-cut rules) narrow the pool at all."""
    return filters is not None and not filters.pre.empty
