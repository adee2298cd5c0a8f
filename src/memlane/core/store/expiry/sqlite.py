"""What makes blocks go by themselves in the SQLite store: TTLs (set, and the sweep of expired blocks) and
retention policies (by age or count). :class:`SqliteExpiry` is the store's
:class:`memlane.core.store.expiry.Expiry`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memlane.core.errors import (
    NotFoundError,
)
from memlane.core.model import (
    MemoryBlock,
)
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.blocks.sqlite_rows import LIVE, blocks_by_pk, count_blocks, delete_blocks, expired_pks
from memlane.core.store.sessions.sqlite import expiry, session_state
from memlane.core.store.sqlite.base import SqliteBase
from memlane.core.store.sqlite.probe import store_error
from memlane.core.timefmt import now_utc, to_epoch


def set_ttl(
    conn: sqlite3.Connection,
    user: str,
    user_id: int,
    ttl_s: int,
    *,
    session_id: str | None,
    block_ids: Sequence[str] | None,
    now: float,
) -> int:
    where = [f"b.user_id = ? AND {LIVE}"]
    params: list[object] = [user_id, now]
    if session_id is not None:
        if session_state(conn, user_id, session_id) is None:
            raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
        where.append("b.session_id = ?")
        params.append(session_id)
    total = 0
    chunks: list[list[str] | None] = [None]
    if block_ids is not None:
        ids = list(dict.fromkeys(block_ids))
        chunks = [ids[i : i + 500] for i in range(0, len(ids), 500)]
    for chunk in chunks:
        clause = list(where)
        extra: list[object] = []
        if chunk is not None:
            clause.append(f"b.id IN ({','.join('?' * len(chunk))})")
            extra = list(chunk)
        total += conn.execute(
            f"UPDATE blocks AS b SET ttl_s = ?, expires_ts = ? WHERE {' AND '.join(clause)}",
            (ttl_s, expiry(now, ttl_s), *params, *extra),
        ).rowcount
    return total


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


class SqliteExpiry(SqliteBase):
    """TTLs and retention in a SQLite store."""

    def retention_policies(self) -> Policies:
        try:
            return read_policies(self._conn())
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        with self._write() as conn:
            write_policy(conn, user, policy, to_epoch(now_utc()))

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        """The user's blocks older than ``before`` (event time) or beyond the ``keep`` newest, at most
        ``limit`` of them, decided and (unless ``dry_run``) deleted in one write transaction; an unknown
        user has none."""
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                return Expired(0, [], 0)
            user_id = int(row[0])
            pks = expired_pks(conn, user_id, before, keep, limit)
            blocks = [] if dry_run else blocks_by_pk(conn, pks)
            if not dry_run:
                delete_blocks(conn, user_id, pks)
            remaining = count_blocks(conn, user_id) - (len(pks) if dry_run else 0)
        if pks and not dry_run:
            self.cache_drop(user_id)
            self.checkpoint()
        return Expired(len(pks), blocks, remaining)

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
        now: float,
    ) -> int:
        with self._write() as conn:
            user_id = self._require_user_id(conn, user)
            n = set_ttl(conn, user, user_id, ttl_s, session_id=session_id, block_ids=block_ids, now=now)
        return n

    def expired_users(self, now: float) -> list[str]:
        rows = self._read(
            "SELECT DISTINCT u.name FROM blocks b JOIN users u ON u.id = b.user_id "
            "WHERE b.expires_ts IS NOT NULL AND b.expires_ts <= ? ORDER BY u.name",
            (now,),
        )
        return [str(r[0]) for r in rows]

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                return []
            user_id = int(row[0])
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = ? AND expires_ts IS NOT NULL AND expires_ts <= ? "
                    "ORDER BY expires_ts, pk LIMIT ?",
                    (user_id, now, -1 if limit is None else limit),
                ).fetchall()
            ]
            blocks = blocks_by_pk(conn, pks)
            if not dry_run:
                delete_blocks(conn, user_id, pks)
        if pks and not dry_run:
            self.cache_drop(user_id)
            self.checkpoint()
        return blocks
