"""Block statements the SQLite store's rooms share, each inside the caller's transaction: the liveness rule every
read applies, the block filters as SQL, and the one path that deletes a user's blocks by reference.

Expiry is decided against the caller's clock: a block is live while ``expires_ts`` is NULL or after ``now``.
Every read of blocks carries :data:`LIVE` (or its pk list of expired blocks, for the in-memory indexes), so a
block is gone from every read the moment it expires, before any sweep deletes it.

:func:`delete_blocks` is the hook every index of blocks follows: whatever holds a block reference (the keys,
their vectors and term bags in the segments, the queue, the embedding cache) is cleaned here, in the transaction
that deletes the blocks."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from memlane.core.model import (
    Filters,
    MemoryBlock,
)
from memlane.core.store.blocks.rows import FULL_BLOCK_COLUMNS as BLOCK_COLUMNS
from memlane.core.store.blocks.rows import row_to_block
from memlane.core.store.sqlite.keys import delete_keys, purge_dead
from memlane.core.timefmt import to_epoch

# The models the embedding cache holds vectors of, one primary-key seek each (usually one model).
CACHED_MODELS = (
    "WITH RECURSIVE m(id) AS (SELECT min(model_id) FROM embed_cache UNION ALL "
    "SELECT (SELECT min(model_id) FROM embed_cache WHERE model_id > m.id) FROM m WHERE m.id IS NOT NULL) "
    "SELECT id FROM m WHERE id IS NOT NULL"
)


# SQLite's bound on parameters per statement is 32,766 in current builds and 999 in old ones.
_CHUNK = 500


def _chunks(pks: Sequence[int]) -> list[list[int]]:
    return [list(pks[i : i + _CHUNK]) for i in range(0, len(pks), _CHUNK)]


def drop_cached(
    conn: sqlite3.Connection, user_id: int, pks: Sequence[int], models: Sequence[str] | None = None
) -> None:
    """Delete the cached vectors of the blocks' key texts that no other key uses (what a delete or an update
    replaces must not linger in the embedding cache). ``models``: the cache's models, if the caller read
    them already; ``pks``: at most a chunk's worth."""
    if models is None:
        models = [str(r[0]) for r in conn.execute(CACHED_MODELS)]
    if not models:
        return
    marks = ",".join("?" * len(pks))
    params = (*pks, user_id)
    # By (model, hash): the cache's primary key; by hash alone SQLite would scan the whole cache.
    conn.execute(
        f"DELETE FROM embed_cache WHERE model_id IN ({','.join('?' * len(models))}) AND hash IN "
        f"(SELECT content_hash FROM search_keys WHERE block_pk IN ({marks}) AND +user_id = ?) "
        "AND NOT EXISTS (SELECT 1 FROM search_keys k WHERE k.content_hash = embed_cache.hash "
        f"AND NOT (k.block_pk IN ({marks}) AND k.user_id = ?))",
        (*models, *params, *params),
    )


def delete_blocks(conn: sqlite3.Connection, user_id: int, pks: Sequence[int]) -> int:
    """Delete the user's blocks ``pks`` and everything that refers to them: their search keys (message,
    summary, facts) with their vectors, term bags and people's words, the keyword statistics, their
    extraction jobs, and the cached vectors of their texts that no other key uses. Bumps the user's
    version (the caller drops its caches). Returns how many blocks went."""
    n = 0
    models = [str(r[0]) for r in conn.execute(CACHED_MODELS)]
    for chunk in _chunks(pks):
        marks = ",".join("?" * len(chunk))
        params = (*chunk, user_id)
        drop_cached(conn, user_id, chunk, models)
        purge_dead(conn, user_id, chunk)
        # "+user_id": by the block index; the user index would scan every key of a large user
        delete_keys(conn, f"block_pk IN ({marks}) AND +user_id = ?", params)
        conn.execute(f"DELETE FROM jobs WHERE block_pk IN ({marks}) AND +user_id = ?", params)
        n += conn.execute(f"DELETE FROM blocks WHERE pk IN ({marks}) AND user_id = ?", params).rowcount
    if n:
        conn.execute("UPDATE users SET version = version + 1 WHERE id = ?", (user_id,))
    return n


def expired_pks(
    conn: sqlite3.Connection, user_id: int, before: float | None, keep: int | None, limit: int | None
) -> list[int]:
    """The user's blocks whose event time is before ``before``, or that are not among the ``keep`` newest
    (by event time, then ingest time, then storage order), oldest first, at most ``limit``."""
    rules: list[str] = []
    params: list[object] = [user_id]
    if before is not None:
        rules.append("event_ts < ?")
        params.append(before)
    if keep is not None:
        rules.append(
            "pk NOT IN (SELECT pk FROM blocks WHERE user_id = ? ORDER BY event_ts DESC, ingest_ts DESC, pk DESC "
            "LIMIT ?)"
        )
        params += [user_id, keep]
    if not rules:
        return []
    params.append(-1 if limit is None else limit)
    rows = conn.execute(
        f"SELECT pk FROM blocks WHERE user_id = ? AND ({' OR '.join(rules)}) ORDER BY event_ts, pk LIMIT ?", params
    ).fetchall()
    return [int(r[0]) for r in rows]


def blocks_by_pk(conn: sqlite3.Connection, pks: Sequence[int]) -> list[MemoryBlock]:
    out: list[MemoryBlock] = []
    for chunk in _chunks(pks):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE b.pk IN ({marks}) "
            "ORDER BY b.event_ts, b.pk",
            chunk,
        ).fetchall()
        out += [row_to_block(r) for r in rows]
    return out


def count_blocks(conn: sqlite3.Connection, user_id: int) -> int:
    return int(conn.execute("SELECT count(*) FROM blocks WHERE user_id = ?", (user_id,)).fetchone()[0])


# A block of alias ``b`` that has not expired at the parameter's time.
LIVE = "(b.expires_ts IS NULL OR b.expires_ts > ?)"


def live_count(where: str) -> str:
    """SQL counting the live blocks (alias ``b``) that ``where`` keeps: all of them, counted on an index,
    less the expired ones, counted on the partial expiry index (a count that read every block's expiry
    would scan a large user's rows). It takes ``where``'s parameters twice, then one more: now."""
    return (
        f"((SELECT count(*) FROM blocks b WHERE {where}) - "
        f"(SELECT count(*) FROM blocks b WHERE {where} AND b.expires_ts IS NOT NULL AND b.expires_ts <= ?))"
    )


def json_path(key: str) -> str:
    """The JSON path of a top-level key, quoted (keys are free text in metadata)."""
    return "$." + json.dumps(key)


def filter_sql(
    filters: Filters | None, *, annotations: bool = True, after: float | None = None, before: float | None = None
) -> tuple[str, list[object]]:
    """The SQL condition (on blocks ``b``) and parameters of ``filters`` (its annotation pairs only with
    ``annotations``) and the event-time window [after, before)."""
    where: list[str] = []
    params: list[object] = []
    if after is not None:
        where.append("b.event_ts >= ?")
        params.append(after)
    if before is not None:
        where.append("b.event_ts < ?")
        params.append(before)
    if filters is not None:
        if filters.sessions is not None:
            where.append(f"b.session_id IN ({','.join('?' * len(filters.sessions))})" if filters.sessions else "0")
            params += list(filters.sessions)
        if filters.block_ids is not None:
            where.append(f"b.id IN ({','.join('?' * len(filters.block_ids))})" if filters.block_ids else "0")
            params += list(filters.block_ids)
        if annotations:
            for key, value in sorted(filters.annotations.items()):
                where.append("json_extract(b.annotations, ?) = ?")
                params += [json_path(key), value]
        if filters.kinds is not None:
            kinds = sorted(k.value for k in filters.kinds)
            where.append(f"b.kind IN ({','.join('?' * len(kinds))})" if kinds else "0")
            params += kinds
        if filters.ingested_after is not None:
            where.append("b.ingest_ts >= ?")
            params.append(to_epoch(filters.ingested_after))
        if filters.ingested_before is not None:
            where.append("b.ingest_ts < ?")
            params.append(to_epoch(filters.ingested_before))
        if filters.prompt_id is not None:
            where.append("b.prompt_id = ?")
            params.append(filters.prompt_id)
            if filters.prompt_version is not None:
                where.append("b.prompt_version = ?")
                params.append(filters.prompt_version)
    return (" AND ".join(where) or "1 = 1"), params


def expired_block_pks(conn: sqlite3.Connection, user_id: int, now: float) -> list[int]:
    """The user's blocks whose TTL has run out (one seek in the partial expiry index; usually none)."""
    rows = conn.execute(
        "SELECT pk FROM blocks WHERE user_id = ? AND expires_ts IS NOT NULL AND expires_ts <= ?", (user_id, now)
    ).fetchall()
    return [int(r[0]) for r in rows]


def filtered_block_pks(conn: sqlite3.Connection, user_id: int, filters: Filters) -> list[int]:
    """The user's blocks (live or not: the caller leaves out the expired) that pass ``filters``."""
    where, params = filter_sql(filters)
    rows = conn.execute(f"SELECT b.pk FROM blocks b WHERE b.user_id = ? AND {where}", (user_id, *params)).fetchall()
    return [int(r[0]) for r in rows]
