"""Deleting blocks and retention in the SQLite store: the one path that deletes a user's blocks by
reference (one block, or a sweep's expired ones), and the retention policies, each inside the caller's
write transaction.

:func:`delete_blocks` is the hook every index of blocks follows: whatever holds a block reference (the
keys, their vectors and term bags in the segments, the queue, the embedding cache) is cleaned here, in the
transaction that deletes the blocks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memlane.core.errors import NotFoundError
from memlane.core.model import MemoryBlock
from memlane.core.retention import Policies, RetentionPolicy
from memlane.core.store.rows import FULL_BLOCK_COLUMNS as BLOCK_COLUMNS
from memlane.core.store.rows import row_to_block
from memlane.core.store.sqlite.keys import delete_keys, purge_dead

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
        if models:
            # By (model, hash): the cache's primary key; by hash alone SQLite would scan the whole cache.
            conn.execute(
                f"DELETE FROM embed_cache WHERE model_id IN ({','.join('?' * len(models))}) AND hash IN "
                f"(SELECT content_hash FROM search_keys WHERE block_pk IN ({marks}) AND +user_id = ?) "
                "AND NOT EXISTS (SELECT 1 FROM search_keys k WHERE k.content_hash = embed_cache.hash "
                f"AND NOT (k.block_pk IN ({marks}) AND k.user_id = ?))",
                (*models, *params, *params),
            )
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


# -- policies ------------------------------------------------------------------------------------------


def _policy(row: Sequence[object]) -> RetentionPolicy:
    age, blocks = row
    return RetentionPolicy(
        max_age_days=None if age is None else int(str(age)), max_blocks=None if blocks is None else int(str(blocks))
    )


def read_policies(conn: sqlite3.Connection) -> Policies:
    default = conn.execute("SELECT max_age_days, max_blocks FROM retention_default WHERE id = 1").fetchone()
    rows = conn.execute(
        "SELECT u.name, r.max_age_days, r.max_blocks FROM retention_policies r JOIN users u ON u.id = r.user_id"
    ).fetchall()
    return Policies(
        default=None if default is None else _policy(default), users={str(r[0]): _policy(r[1:]) for r in rows}
    )


def write_policy(conn: sqlite3.Connection, user: str | None, policy: RetentionPolicy | None, now: float) -> None:
    """Set (or with ``policy`` None remove) the default policy (``user`` None) or a user's own;
    NotFoundError for a user that does not exist."""
    if user is None:
        if policy is None:
            conn.execute("DELETE FROM retention_default")
            return
        conn.execute(
            "INSERT INTO retention_default(id, max_age_days, max_blocks, updated_at) VALUES (1, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET max_age_days = excluded.max_age_days, "
            "max_blocks = excluded.max_blocks, updated_at = excluded.updated_at",
            (policy.max_age_days, policy.max_blocks, now),
        )
        return
    row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
    if row is None:
        raise NotFoundError(f"user {user!r} not found")
    if policy is None:
        conn.execute("DELETE FROM retention_policies WHERE user_id = ?", (int(row[0]),))
        return
    conn.execute(
        "INSERT INTO retention_policies(user_id, max_age_days, max_blocks, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(user_id) DO UPDATE SET max_age_days = excluded.max_age_days, "
        "max_blocks = excluded.max_blocks, updated_at = excluded.updated_at",
        (int(row[0]), policy.max_age_days, policy.max_blocks, now),
    )
