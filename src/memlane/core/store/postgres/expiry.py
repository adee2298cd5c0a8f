"""Deleting blocks and retention in the PostgreSQL store: the one path that deletes a user's blocks by
reference (one block, or a sweep's expired ones), and the retention policies, each inside the caller's
transaction, which holds the user's row lock (the lock order users, jobs, blocks, keys).

:func:`delete_blocks` is the hook every index of blocks follows: whatever holds a block reference (jobs,
keys and their vectors, the sessions' term counts, the embedding cache) is cleaned here.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.core.errors import NotFoundError
from memlane.core.model import MemoryBlock
from memlane.core.retention import Policies, RetentionPolicy
from memlane.core.store.postgres.blockrows import COLUMNS, to_block
from memlane.core.store.postgres.blocks import take_session_terms
from memlane.core.store.postgres.keys import Conn, bump_user, delete_block_keys


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


# -- policies ------------------------------------------------------------------------------------------


def _policy(age: object, blocks: object) -> RetentionPolicy:
    return RetentionPolicy(
        max_age_days=None if age is None else int(str(age)), max_blocks=None if blocks is None else int(str(blocks))
    )


def read_policies(conn: Conn) -> Policies:
    default = conn.execute("SELECT max_age_days, max_blocks FROM retention_default WHERE id = 1").fetchone()
    rows = conn.execute(
        "SELECT u.name, r.max_age_days, r.max_blocks FROM retention_policies r JOIN users u ON u.id = r.user_id"
    ).fetchall()
    return Policies(
        default=None if default is None else _policy(*default), users={str(r[0]): _policy(r[1], r[2]) for r in rows}
    )


def write_policy(conn: Conn, user_id: int | None, user: str | None, policy: RetentionPolicy | None) -> None:
    """Set (or with ``policy`` None remove) the default policy (``user`` None) or a user's own, whose row
    the caller has locked (``user_id``; None: no such user, NotFoundError)."""
    if user is None:
        if policy is None:
            conn.execute("DELETE FROM retention_default")
            return
        conn.execute(
            "INSERT INTO retention_default(id, max_age_days, max_blocks, updated_at) "
            "VALUES (1, %s, %s, extract(epoch FROM now())) ON CONFLICT (id) DO UPDATE SET "
            "max_age_days = excluded.max_age_days, max_blocks = excluded.max_blocks, updated_at = excluded.updated_at",
            (policy.max_age_days, policy.max_blocks),
        )
        return
    if user_id is None:
        raise NotFoundError(f"user {user!r} not found")
    if policy is None:
        conn.execute("DELETE FROM retention_policies WHERE user_id = %s", (user_id,))
        return
    conn.execute(
        "INSERT INTO retention_policies(user_id, max_age_days, max_blocks, updated_at) "
        "VALUES (%s, %s, %s, extract(epoch FROM now())) ON CONFLICT (user_id) DO UPDATE SET "
        "max_age_days = excluded.max_age_days, max_blocks = excluded.max_blocks, updated_at = excluded.updated_at",
        (user_id, policy.max_age_days, policy.max_blocks),
    )
