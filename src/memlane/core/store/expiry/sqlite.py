"""What makes blocks go by themselves in the SQLite store: TTLs (set, and the sweep of expired blocks) and
retention policies (by age or count). :class:`SqliteExpiry` is the store's
:class:`memlane.core.store.expiry.Expiry`."""

from __future__ import annotations

import sqlite3

from memlane.core.errors import (
    NotFoundError,
)
from memlane.core.model import (
    MemoryBlock,
)
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.blocks.sqlite_rows import LIVE, blocks_by_pk, count_blocks, delete_blocks, expired_pks
from memlane.core.store.expiry import DEFAULT_POLICY, USER_POLICIES, TtlChange, policies, policy_statement
from memlane.core.store.sessions.sqlite import expiry, session_state
from memlane.core.store.sqlite.base import SqliteBase
from memlane.core.store.sqlite.probe import store_error
from memlane.core.timefmt import now_utc, to_epoch


def set_ttl(conn: sqlite3.Connection, user: str, user_id: int, change: TtlChange) -> int:
    where = [f"b.user_id = ? AND {LIVE}"]
    params: list[object] = [user_id, change.now]
    if change.session_id is not None:
        if session_state(conn, user_id, change.session_id) is None:
            raise NotFoundError(f"session {change.session_id!r} not found for user {user!r}")
        where.append("b.session_id = ?")
        params.append(change.session_id)
    total = 0
    chunks: list[list[str] | None] = [None]
    if change.block_ids is not None:
        ids = list(dict.fromkeys(change.block_ids))
        chunks = [ids[i : i + 500] for i in range(0, len(ids), 500)]
    for chunk in chunks:
        clause = list(where)
        extra: list[object] = []
        if chunk is not None:
            clause.append(f"b.id IN ({','.join('?' * len(chunk))})")
            extra = list(chunk)
        total += conn.execute(
            f"UPDATE blocks AS b SET ttl_s = ?, expires_ts = ? WHERE {' AND '.join(clause)}",
            (change.ttl_s, expiry(change.now, change.ttl_s), *params, *extra),
        ).rowcount
    return total


# A policy's two statements (policy_statement names the table and its key).
DELETE_POLICY = "DELETE FROM {table} WHERE {key} = ?"
UPSERT_POLICY = (
    "INSERT INTO {table}({key}, max_age_days, max_blocks, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT({key}) DO UPDATE SET max_age_days = excluded.max_age_days, "
    "max_blocks = excluded.max_blocks, updated_at = excluded.updated_at"
)


def read_policies(conn: sqlite3.Connection) -> Policies:
    return policies(conn.execute(DEFAULT_POLICY).fetchone(), conn.execute(USER_POLICIES).fetchall())


class SqliteExpiry(SqliteBase):
    """TTLs and retention in a SQLite store."""

    def retention_policies(self) -> Policies:
        try:
            return read_policies(self._conn())
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        now = to_epoch(now_utc())
        with self._write() as conn:
            row = None if user is None else conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            user_id = None if row is None else int(row[0])
            conn.execute(*policy_statement(DELETE_POLICY, UPSERT_POLICY, user, user_id, policy, now))

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

    def set_ttl(self, user: str, change: TtlChange) -> int:
        with self._write() as conn:
            return set_ttl(conn, user, self._require_user_id(conn, user), change)

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
