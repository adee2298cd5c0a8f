"""Writing and deleting search keys: the rows behind both retrievers (FTS5 and the vector table)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.store.vectors import KIND_CODES, UserMatrix

# (block pk, kind, text, content hash, event time as epoch seconds)
KeyRow = tuple[int, str, str, str, float]


def insert_keys(conn: sqlite3.Connection, user_id: int, rows: Sequence[KeyRow], vectors: Vectors) -> UserMatrix:
    """Insert keys with their FTS rows and vectors; returns them as matrix rows for the vector cache."""
    ns = f"u{user_id}"
    key_pks: list[int] = []
    for block_pk, kind, text, chash, _ in rows:
        cur = conn.execute(
            "INSERT INTO search_keys(user_id, block_pk, ns, kind, text, content_hash) VALUES (?,?,?,?,?,?)",
            (user_id, block_pk, ns, kind, text, chash),
        )
        key_pk = int(cur.lastrowid or 0)
        key_pks.append(key_pk)
        conn.execute("INSERT INTO keys_fts(rowid, ns, kind, text) VALUES (?,?,?,?)", (key_pk, ns, kind, text))
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    conn.executemany(
        "INSERT INTO key_vectors(user_id, key_pk, block_pk, kind, event_ts, embedding) VALUES (?,?,?,?,?,?)",
        [
            (user_id, kp, r[0], r[1], r[4], vecs[i].tobytes())
            for i, (kp, r) in enumerate(zip(key_pks, rows, strict=True))
        ],
    )
    return UserMatrix(
        version=-1,
        vectors=vecs,
        block_pks=np.array([r[0] for r in rows], dtype=np.int64),
        kinds=np.array([KIND_CODES[r[1]] for r in rows], dtype=np.int8),
        event_ts=np.array([r[4] for r in rows], dtype=np.float64),
    )


def delete_keys(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> int:
    """Delete the keys matching ``where`` (an SQL condition on search_keys) from all three tables."""
    conn.execute(
        "INSERT INTO keys_fts(keys_fts, rowid, ns, kind, text) "
        f"SELECT 'delete', pk, ns, kind, text FROM search_keys WHERE {where}",
        params,
    )
    conn.execute(f"DELETE FROM key_vectors WHERE key_pk IN (SELECT pk FROM search_keys WHERE {where})", params)
    return int(conn.execute(f"DELETE FROM search_keys WHERE {where}", params).rowcount)
