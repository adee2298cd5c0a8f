"""Writing and deleting search keys: the rows behind both retrievers (key terms and key vectors)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.store.sqlite.terms import TermIds, delete_key_terms, insert_key_terms
from memlane.core.store.terms import UserTerms
from memlane.core.store.vectors import KIND_CODES, UserMatrix

# (block pk, kind, text, content hash, event time as epoch seconds)
KeyRow = tuple[int, str, str, str, float]


def insert_keys(
    conn: sqlite3.Connection, user_id: int, rows: Sequence[KeyRow], vectors: Vectors, term_ids: TermIds
) -> tuple[UserMatrix, UserTerms]:
    """Insert keys with their vectors and term bags; returns them as rows for the user's caches."""
    ns = f"u{user_id}"
    key_pks: list[int] = []
    for block_pk, kind, text, chash, _ in rows:
        cur = conn.execute(
            "INSERT INTO search_keys(user_id, block_pk, ns, kind, text, content_hash) VALUES (?,?,?,?,?,?)",
            (user_id, block_pk, ns, kind, text, chash),
        )
        key_pks.append(int(cur.lastrowid or 0))
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    conn.executemany(
        "INSERT INTO key_vectors(user_id, key_pk, block_pk, kind, event_ts, embedding) VALUES (?,?,?,?,?,?)",
        [
            (user_id, kp, r[0], r[1], r[4], vecs[i].tobytes())
            for i, (kp, r) in enumerate(zip(key_pks, rows, strict=True))
        ],
    )
    keys = [(kp, r[0], r[1], r[2], r[4]) for kp, r in zip(key_pks, rows, strict=True)]
    terms = insert_key_terms(conn, user_id, keys, term_ids)
    matrix = UserMatrix(
        version=-1,
        vectors=vecs,
        block_pks=np.array([r[0] for r in rows], dtype=np.int64),
        kinds=np.array([KIND_CODES[r[1]] for r in rows], dtype=np.int8),
        event_ts=np.array([r[4] for r in rows], dtype=np.float64),
    )
    return matrix, terms


def delete_keys(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> int:
    """Delete the keys matching ``where`` (an SQL condition on search_keys) from all three tables."""
    keys = [(int(u), int(k)) for u, k in conn.execute(f"SELECT user_id, pk FROM search_keys WHERE {where}", params)]
    if not keys:
        return 0
    delete_key_terms(conn, keys)
    conn.executemany("DELETE FROM key_vectors WHERE user_id = ? AND key_pk = ?", keys)
    return int(conn.execute(f"DELETE FROM search_keys WHERE {where}", params).rowcount)


def load_user_matrix(conn: sqlite3.Connection, user_id: int, version: int) -> UserMatrix:
    """The user's key vectors as stored (call inside a read transaction that also read ``version``)."""
    rows = conn.execute(
        "SELECT block_pk, kind, event_ts, embedding FROM key_vectors WHERE user_id = ? ORDER BY key_pk", (user_id,)
    ).fetchall()
    if not rows:
        return UserMatrix(
            version=version,
            vectors=np.zeros((0, 0), dtype=np.float32),
            block_pks=np.zeros(0, dtype=np.int64),
            kinds=np.zeros(0, dtype=np.int8),
            event_ts=np.zeros(0, dtype=np.float64),
        )
    pks, kinds, ts, vectors = zip(*rows, strict=True)  # one C-level transpose, then a column each
    return UserMatrix(
        version=version,
        vectors=np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(rows), -1),
        block_pks=np.array(pks, dtype=np.int64),
        kinds=np.array([KIND_CODES[k] for k in kinds], dtype=np.int8),
        event_ts=np.array(ts, dtype=np.float64),
    )
