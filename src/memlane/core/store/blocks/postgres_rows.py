"""Block statements the PostgreSQL store's rooms share: writing a batch with COPY, reading rows back as
:class:`MemoryBlock` values, the liveness rule every read applies (a block whose TTL ran out is gone for reads
at once, before any sweep), the block filters of a search or a browse (:class:`memlane.core.model.Filters`) as
SQL over the ``blocks`` row ``b``, the sessions' word counts, and the one path that deletes a user's blocks by
reference.

:func:`delete_blocks` is the hook every index of blocks follows: whatever holds a block reference (jobs, keys
and their vectors, the sessions' term counts, the embedding cache) is cleaned here, inside the caller's
transaction, which holds the user's row lock (the lock order users, jobs, blocks, keys)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from memlane.core.model import (
    Filters,
    MemoryBlock,
)
from memlane.core.store.blocks.rows import FULL_BLOCK_COLUMNS, row_to_block
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.keys import bump_user, delete_block_keys
from memlane.core.timefmt import now_utc, to_epoch

ENSURE_SESSIONS = (
    "INSERT INTO sessions(user_id, conversation_id, session_id, started_at, created_at) "
    "SELECT %(user_id)s, c, s, t, %(now)s "
    "FROM unnest(%(sessions)s::text[], %(conversations)s::text[], %(starts)s::float8[]) AS x(s, c, t) "
    "ON CONFLICT (user_id, session_id) DO NOTHING"
)


def session_starts(blocks: Sequence[MemoryBlock]) -> tuple[list[str], list[str], list[float]]:
    """The sessions of these blocks, sorted (two adds making the same sessions take their locks in one
    order), each with the conversation of its first block and the earliest event time of its blocks."""
    first: dict[str, tuple[str, float]] = {}
    for b in blocks:
        ts = b.event_time.timestamp()
        conv, start = first.get(b.session_id, (b.conversation_id, ts))
        first[b.session_id] = (conv, min(start, ts))
    ids = sorted(first)
    return ids, [first[s][0] for s in ids], [first[s][1] for s in ids]


to_block = row_to_block


def delete_blocks(conn: Conn, user_id: int, pks: Sequence[int]) -> int:
    """Delete the user's blocks ``pks`` and everything that refers to them: extraction jobs, the cached
    vectors of their keys' texts that no other key uses, their keys (message, summary, facts) with vectors
    and tsvectors, their people's words in the sessions' counts. Moves the user's counters. Returns how
    many blocks went."""
    if not pks:
        return 0
    ids = list(pks)
    conn.execute("DELETE FROM jobs WHERE user_id = %s AND block_pk = ANY(%s)", (user_id, ids))
    drop_cached(conn, user_id, ids)
    keys, tokens = delete_block_keys(conn, user_id, ids, keep_messages=False)
    take_session_terms(conn, user_id, ids)
    n = conn.execute("DELETE FROM blocks WHERE user_id = %s AND pk = ANY(%s)", (user_id, ids)).rowcount
    bump_user(conn, user_id, -keys, -tokens)
    return int(n)


def drop_cached(conn: Conn, user_id: int, pks: Sequence[int] | None) -> None:
    """Drop the cached vectors of these blocks' keys' texts (``None``: of all the user's blocks) that no other
    key uses, before the keys go (a deletion, or an update that replaces the block's text). Three
    statements of one table each, so that a distributed store runs them (the cache is distributed by hash,
    the keys by user): the blocks' hashes (the user's node), which of them other keys hold (every node,
    through the hash index), then the cache entries of the rest (through the cache's hash index)."""
    params: dict[str, object] = {"u": user_id, "pks": None if pks is None else list(pks)}
    blocks = "" if pks is None else " AND block_pk = ANY(%(pks)s)"
    hashes = [
        str(r[0])
        for r in conn.execute(
            f"SELECT DISTINCT content_hash FROM search_keys WHERE user_id = %(u)s{blocks}", params
        ).fetchall()
    ]
    if not hashes:
        return
    others = "user_id <> %(u)s" if pks is None else "NOT (user_id = %(u)s AND block_pk = ANY(%(pks)s))"
    kept = {
        str(r[0])
        for r in conn.execute(
            f"SELECT DISTINCT content_hash FROM search_keys WHERE content_hash = ANY(%(hashes)s) AND {others}",
            {**params, "hashes": hashes},
        ).fetchall()
    }
    conn.execute("DELETE FROM embed_cache WHERE hash = ANY(%s)", ([h for h in hashes if h not in kept],))


def expired_pks(conn: Conn, user_id: int, before: float | None, keep: int | None, limit: int | None) -> list[int]:
    """The user's blocks whose event time is before ``before``, or that are not among the ``keep`` newest
    (by event time, then ingest time, then storage order), oldest first, at most ``limit``."""
    rules: list[str] = []
    if before is not None:
        rules.append("event_ts < %(before)s")
    if keep is not None:
        rules.append(
            "pk NOT IN (SELECT pk FROM blocks WHERE user_id = %(u)s "
            "ORDER BY event_ts DESC, ingest_ts DESC, pk DESC LIMIT %(keep)s)"
        )
    if not rules:
        return []
    rows = conn.execute(
        f"SELECT pk FROM blocks WHERE user_id = %(u)s AND ({' OR '.join(rules)}) ORDER BY event_ts, pk LIMIT %(limit)s",
        {"u": user_id, "before": before, "keep": keep, "limit": limit},
    ).fetchall()
    return [int(r[0]) for r in rows]


def blocks_by_pk(conn: Conn, user_id: int, pks: Sequence[int]) -> list[MemoryBlock]:
    if not pks:
        return []
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id "
        "WHERE b.user_id = %s AND b.pk = ANY(%s) ORDER BY b.event_ts, b.pk",
        (user_id, list(pks)),
    ).fetchall()
    return [to_block(r) for r in rows]


def count_blocks(conn: Conn, user_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM blocks WHERE user_id = %s", (user_id,)).fetchone()
    return 0 if row is None else int(row[0])


COLUMNS = FULL_BLOCK_COLUMNS


# A block is live until its expiry (NULL: never); every read of blocks has this in its WHERE clause.
LIVE = "(b.expires_ts IS NULL OR b.expires_ts > %(now)s)"


def now_epoch(now: float | None = None) -> float:
    """``now``, or the current time as epoch seconds (the clock the core decides expiries with)."""
    return to_epoch(now_utc()) if now is None else now


def sides_json(block: MemoryBlock) -> str:
    return json.dumps([list(s) for s in block.sides])


# The rules of a Filters that compare one column with the filter's value: (Filters attribute, the condition on
# the row ``b`` with the value as the parameter "f_<attribute>", the parameter from the value), in the order
# they are written.
_FILTER_RULES: tuple[tuple[str, str, Callable[[Any], object]], ...] = (
    ("sessions", "b.session_id = ANY(%(f_sessions)s::text[])", list),
    ("block_ids", "b.id = ANY(%(f_block_ids)s::text[])", list),
    ("kinds", "b.kind = ANY(%(f_kinds)s::text[])", lambda kinds: sorted(k.value for k in kinds)),
    ("ingested_after", "b.ingest_ts >= %(f_ingested_after)s", to_epoch),
    ("ingested_before", "b.ingest_ts < %(f_ingested_before)s", to_epoch),
    ("prompt_id", "b.prompt_id = %(f_prompt_id)s", str),
)


def filter_sql(
    filters: Filters | None,
    params: dict[str, object],
    *,
    annotations: bool = True,
    after: float | None = None,
    before: float | None = None,
) -> str:
    """The rules of ``filters`` over the row ``b`` and the event-time window [after, before) as `` AND ...``
    clauses (their values put in ``params``); with ``annotations`` False the annotation pairs are left out
    (checked after the cut)."""
    sql = ""
    if after is not None:
        sql += " AND b.event_ts >= %(after)s"
        params["after"] = after
    if before is not None:
        sql += " AND b.event_ts < %(before)s"
        params["before"] = before
    if filters is None:
        return sql
    for name, condition, value in _FILTER_RULES:
        given = getattr(filters, name)
        if given is not None:
            sql += f" AND {condition}"
            params[f"f_{name}"] = value(given)
    if filters.prompt_id is not None and filters.prompt_version is not None:
        sql += " AND b.prompt_version = %(f_prompt_version)s"
        params["f_prompt_version"] = filters.prompt_version
    if annotations and filters.annotations:
        sql += " AND b.annotations @> %(f_ann)s::jsonb"
        params["f_ann"] = json.dumps(dict(filters.annotations))
    return sql


def restricts(filters: Filters | None) -> bool:
    """Whether ``filters`` (their pre-cut rules) narrow the pool at all."""
    return filters is not None and not filters.pre.empty


_BLOCK_COPY = (
    "COPY blocks (user_id, pk, id, conversation_id, session_id, exchange_index, perspective, mode, message, summary, "
    "contexts, message_ids, event_ts, ingest_ts, time_annotation, extraction_status, extraction_prompt, content_hash, "
    "annotations, kind, sides, ttl_s, expires_ts, updated_ts, prompt_id, prompt_version, fail_count, last_queued_ts) "
    "FROM STDIN"
)


# Cross-table consistency, each a count of rows that should not exist (PostgresStore.integrity_check).
INTEGRITY_CHECKS = {
    "search keys without a vector": "SELECT count(*) FROM search_keys k WHERE NOT EXISTS "
    "(SELECT 1 FROM key_vectors v WHERE v.user_id = k.user_id AND v.key_pk = k.pk)",
    "vectors without a search key": "SELECT count(*) FROM key_vectors v WHERE NOT EXISTS "
    "(SELECT 1 FROM search_keys k WHERE k.user_id = v.user_id AND k.pk = v.key_pk)",
    "jobs without a block": "SELECT count(*) FROM jobs j WHERE NOT EXISTS "
    "(SELECT 1 FROM blocks b WHERE b.user_id = j.user_id AND b.pk = j.block_pk)",
    "rows of unknown users": "SELECT (SELECT count(*) FROM key_vectors v WHERE NOT EXISTS "
    "(SELECT 1 FROM users u WHERE u.id = v.user_id)) + (SELECT count(*) FROM jobs j WHERE NOT EXISTS "
    "(SELECT 1 FROM users u WHERE u.id = j.user_id))",
    "users whose BM25 counters are off": "SELECT count(*) FROM users u WHERE (u.n_keys, u.total_len) <> "
    "(SELECT count(*), coalesce(sum(dl), 0) FROM search_keys k WHERE k.user_id = u.id)",
    "users whose session term counts are off": "SELECT count(*) FROM users u WHERE "
    "(SELECT coalesce(sum(tf), 0) FROM session_terms s WHERE s.user_id = u.id) <> "
    "(SELECT coalesce(sum(words_len), 0) FROM blocks b WHERE b.user_id = u.id)",
    "blocks without a session": "SELECT count(*) FROM blocks b WHERE NOT EXISTS "
    "(SELECT 1 FROM sessions s WHERE s.user_id = b.user_id AND s.session_id = b.session_id)",
    "session terms of unknown users": "SELECT count(*) FROM session_terms s WHERE NOT EXISTS "
    "(SELECT 1 FROM users u WHERE u.id = s.user_id)",
    "sessions whose length is off": "SELECT count(*) FROM (SELECT user_id, session_id, sum(words_len) AS words "
    "FROM blocks GROUP BY user_id, session_id HAVING sum(words_len) > 0) b "
    "FULL JOIN session_lengths s USING (user_id, session_id) WHERE b.words IS DISTINCT FROM s.words",
}


# The blocks' people's words (the generated column ``words``) summed per session into ``session_terms``.
ADD_SESSION_TERMS = """
INSERT INTO session_terms (user_id, lexeme, session_id, tf)
SELECT b.user_id, l.lexeme, b.session_id, sum(array_length(l.positions, 1))
FROM blocks b, unnest(b.words) l WHERE b.user_id = %(user_id)s AND b.pk = ANY(%(pks)s)
GROUP BY b.user_id, l.lexeme, b.session_id
ON CONFLICT (user_id, lexeme, session_id) DO UPDATE SET tf = session_terms.tf + excluded.tf
"""


_TAKE_SESSION_TERMS = """
UPDATE session_terms s SET tf = s.tf - g.tf
FROM (
    SELECT l.lexeme, b.session_id, sum(array_length(l.positions, 1)) AS tf
    FROM blocks b, unnest(b.words) l WHERE b.user_id = %(user_id)s AND b.pk = ANY(%(pks)s)
    GROUP BY l.lexeme, b.session_id
) g
WHERE s.user_id = %(user_id)s AND s.lexeme = g.lexeme AND s.session_id = g.session_id
RETURNING s.lexeme, s.session_id, s.tf
"""


ADD_SESSION_LENGTHS = """
INSERT INTO session_lengths (user_id, session_id, words)
SELECT user_id, session_id, sum(words_len) FROM blocks WHERE user_id = %(user_id)s AND pk = ANY(%(pks)s)
GROUP BY user_id, session_id HAVING sum(words_len) > 0
ON CONFLICT (user_id, session_id) DO UPDATE SET words = session_lengths.words + excluded.words
"""


_TAKE_SESSION_LENGTHS = """
UPDATE session_lengths s SET words = s.words - g.words
FROM (
    SELECT session_id, sum(words_len) AS words FROM blocks WHERE user_id = %(user_id)s AND pk = ANY(%(pks)s)
    GROUP BY session_id
) g
WHERE s.user_id = %(user_id)s AND s.session_id = g.session_id
RETURNING s.session_id, s.words
"""


def add_session_terms(conn: Conn, user_id: int, pks: Sequence[int]) -> None:
    """Count the people's words of these (just written) blocks into their sessions' term frequencies and
    lengths."""
    params = {"user_id": user_id, "pks": list(pks)}
    conn.execute(ADD_SESSION_TERMS, params)
    conn.execute(ADD_SESSION_LENGTHS, params)


def take_session_terms(conn: Conn, user_id: int, pks: Sequence[int]) -> None:
    """Take the people's words of these blocks (about to be deleted) out of their sessions' term
    frequencies and lengths, deleting the rows that fall to zero."""
    params = {"user_id": user_id, "pks": list(pks)}
    emptied = [r for r in conn.execute(_TAKE_SESSION_TERMS, params).fetchall() if r[2] <= 0]
    if emptied:
        conn.execute(
            "DELETE FROM session_terms WHERE user_id = %s AND (lexeme, session_id) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[]))",
            (user_id, [r[0] for r in emptied], [r[1] for r in emptied]),
        )
    ended = [r[0] for r in conn.execute(_TAKE_SESSION_LENGTHS, params).fetchall() if r[1] <= 0]
    if ended:
        conn.execute(
            "DELETE FROM session_lengths WHERE user_id = %s AND session_id = ANY(%s::text[])", (user_id, ended)
        )


def last_exchange(conn: Conn, user_id: int, conversation: str, session: str) -> int | None:
    """The highest exchange index of the user's session (an index seek on ``blocks_user_session``), or None."""
    row = conn.execute(
        "SELECT max(exchange_index) FROM blocks WHERE user_id = %s AND conversation_id = %s AND session_id = %s",
        (user_id, conversation, session),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def copy_blocks(
    conn: Conn,
    user_id: int,
    pks: Sequence[int],
    blocks: Sequence[MemoryBlock],
    expires: Sequence[float | None],
    queued_at: float | None,
) -> None:
    """Write blocks (with their pre-allocated pks, their expiries, and when their extraction was queued) in
    one COPY: one round trip for a whole batch."""
    with conn.cursor() as cur, cur.copy(_BLOCK_COPY) as copy:
        for pk, b, expiry in zip(pks, blocks, expires, strict=True):
            queued = queued_at if queued_at is not None else _epoch(b.last_queued_at)
            copy.write_row(
                (
                    user_id, pk, b.id, b.conversation_id, b.session_id, b.exchange_index, b.perspective,
                    b.mode.value, b.message, b.summary, json.dumps(list(b.contexts)),
                    json.dumps(list(b.message_ids)), to_epoch(b.event_time), to_epoch(b.ingest_time),
                    b.time_annotation, b.extraction_status.value, b.extraction_prompt, b.content_hash,
                    json.dumps(b.annotations, sort_keys=True), b.kind.value, sides_json(b), b.ttl_s, expiry,
                    _epoch(b.updated_at), b.prompt_id, b.prompt_version, b.fail_count, queued,
                )
            )  # fmt: skip


def _epoch(dt: datetime | None) -> float | None:
    return None if dt is None else to_epoch(dt)
