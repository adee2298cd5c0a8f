"""Writing, deleting and loading search keys: the rows behind both retrievers (key text in ``search_keys``;
each key's vector and term bag in the user's segments, :mod:`memlane.core.store.sqlite.segments`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.store.candidates.terms import UserTerms, session_code
from memlane.core.store.candidates.vectors import KIND_CODES, UserMatrix
from memlane.core.store.sqlite.ann import forget_keys
from memlane.core.store.sqlite.segments import Segment, blank_keys, insert_segment, load_user, quantize, remove_keys
from memlane.core.store.sqlite.terms import TermIds, index_texts, unindex, unindex_texts, word_bags

# (block pk, kind, text, content hash, event time as epoch seconds, session id, the block's people's words:
# memlane.core.ranking.session_words.people_words, "" for keys other than the message)
KeyRow = tuple[int, str, str, str, float, str, str]


def insert_keys(
    conn: sqlite3.Connection, user_id: int, rows: Sequence[KeyRow], vectors: Vectors, term_ids: TermIds
) -> tuple[UserMatrix, UserTerms]:
    """Insert keys with their vectors and term bags; returns them as rows for the user's caches."""
    ns = f"u{user_id}"
    first = next_key_pks(conn, len(rows))
    key_pks = list(range(first, first + len(rows)))
    conn.executemany(
        "INSERT INTO search_keys(pk, user_id, block_pk, ns, kind, text, content_hash) VALUES (?,?,?,?,?,?,?)",
        [(pk, user_id, r[0], ns, r[1], r[2], r[3]) for pk, r in zip(key_pks, rows, strict=True)],
    )
    bags = index_texts(conn, [r[2] for r in rows], term_ids)
    words = word_bags(conn, [r[6] for r in rows], term_ids)
    q, scales = quantize(np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(rows), -1))
    segment = Segment(
        key_pks=np.array(key_pks, dtype=np.int64),
        block_pks=np.array([r[0] for r in rows], dtype=np.int64),
        kinds=np.array([KIND_CODES[r[1]] for r in rows], dtype=np.int8),
        event_ts=np.array([r[4] for r in rows], dtype=np.float64),
        lengths=bags.lengths,
        entries=bags.entries,
        term_ids=bags.term_ids,
        counts=bags.counts,
        vectors=q,
        scales=scales,
        sessions=np.array([session_code(r[5]) for r in rows], dtype=np.int64),
        words_lengths=words.lengths,
        words_entries=words.entries,
        words_term_ids=words.term_ids,
        words_counts=words.counts,
    )
    insert_segment(conn, user_id, segment)
    return segment.matrix(-1), segment.terms(-1)


def next_key_pks(conn: sqlite3.Connection, n: int) -> int:
    """The first of ``n`` fresh key pks, reserved (call inside the write transaction). Key pks are never
    reused, even after the keys holding the highest ones are deleted (SQLite's own rowids would be): an
    approximate index names keys by pk and tells the keys it holds from newer ones by a pk watermark
    (:mod:`memlane.core.store.sqlite.ann`)."""
    (high,) = conn.execute(
        "SELECT max(coalesce((SELECT max(pk) FROM search_keys), 0), "
        "coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'key_pk_high'), 0))"
    ).fetchone()
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('key_pk_high', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (str(int(high) + n),),
    )
    return int(high) + 1


def delete_keys(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> int:
    """Delete the keys matching ``where`` (an SQL condition on search_keys) with their vectors and term bags."""
    by_user: dict[int, list[int]] = {}
    for user_id, key_pk in conn.execute(f"SELECT user_id, pk FROM search_keys WHERE {where}", params):
        by_user.setdefault(int(user_id), []).append(int(key_pk))
    if not by_user:
        return 0
    for user_id, key_pks in by_user.items():
        forget_keys(conn, user_id, key_pks)
        gone = remove_keys(conn, user_id, key_pks)
        unindex(conn, gone.n, int(gone.lengths.sum()), gone.term_ids)
    return int(conn.execute(f"DELETE FROM search_keys WHERE {where}", params).rowcount)


def retire_keys(conn: sqlite3.Connection, user_id: int, block_pk: int, term_ids: TermIds) -> int:
    """Retire every key of the block (an update replaces them): out of ``search_keys``, the statistics and
    the approximate index now, listed in ``dead_keys`` until a rewrite of their segments drops them
    (:mod:`memlane.core.store.sqlite.segments`). Returns how many went."""
    rows = conn.execute(
        # "+user_id": the planner would take the user index and scan every key of a large user
        "SELECT pk, text FROM search_keys WHERE block_pk = ? AND +user_id = ? ORDER BY pk",
        (block_pk, user_id),
    ).fetchall()
    if not rows:
        return 0
    key_pks = [int(r[0]) for r in rows]
    forget_keys(conn, user_id, key_pks)
    blank_keys(conn, user_id, key_pks)
    unindex_texts(conn, [str(r[1]) for r in rows], term_ids)
    conn.executemany(
        "INSERT INTO dead_keys(user_id, key_pk, block_pk) VALUES (?, ?, ?)", [(user_id, k, block_pk) for k in key_pks]
    )
    conn.execute("DELETE FROM search_keys WHERE block_pk = ? AND +user_id = ?", (block_pk, user_id))
    return len(key_pks)


def purge_dead(conn: sqlite3.Connection, user_id: int, block_pks: Sequence[int]) -> None:
    """Drop the retired keys of the blocks (being deleted) from the segments now."""
    for start in range(0, len(block_pks), 500):
        chunk = list(block_pks[start : start + 500])
        rows = conn.execute(
            f"SELECT key_pk FROM dead_keys WHERE user_id = ? AND block_pk IN ({','.join('?' * len(chunk))})",
            (user_id, *chunk),
        ).fetchall()
        if rows:
            remove_keys(conn, user_id, [int(r[0]) for r in rows])  # their statistics went when they retired


def load_user_index(conn: sqlite3.Connection, user_id: int, version: int) -> tuple[UserMatrix, UserTerms]:
    """The user's key vectors and term bags as stored (call inside a read transaction that also read
    ``version``)."""
    segment = load_user(conn, user_id)
    return segment.matrix(version), segment.terms(version)
