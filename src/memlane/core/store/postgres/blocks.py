"""Block rows: writing a batch with COPY and reading rows back as :class:`MemoryBlock` values."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from memlane.core.model import MemoryBlock
from memlane.core.store.postgres.blockrows import sides_json
from memlane.core.store.postgres.keys import Conn
from memlane.core.timefmt import to_epoch

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
