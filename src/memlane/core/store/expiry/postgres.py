"""What makes blocks go by themselves in the PostgreSQL store: TTLs (set, and the sweep of expired blocks) and
retention policies (by age or count), each inside a transaction that holds the user's row lock.
:class:`PostgresExpiry` is the store's :class:`memlane.core.store.expiry.Expiry`."""

from __future__ import annotations

from memlane.core.errors import NotFoundError
from memlane.core.model import (
    MemoryBlock,
)
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.blocks.postgres_rows import LIVE, blocks_by_pk, count_blocks, delete_blocks, expired_pks
from memlane.core.store.expiry import DEFAULT_POLICY, USER_POLICIES, TtlChange, policies, policy_statement
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.sessions.postgres import session_row
from memlane.core.timefmt import now_utc, to_epoch

# A policy's two statements (policy_statement names the table and its key). updated_at is the caller's clock.
DELETE_POLICY = "DELETE FROM {table} WHERE {key} = %s"
UPSERT_POLICY = (
    "INSERT INTO {table}({key}, max_age_days, max_blocks, updated_at) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT ({key}) DO UPDATE SET max_age_days = excluded.max_age_days, "
    "max_blocks = excluded.max_blocks, updated_at = excluded.updated_at"
)


def read_policies(conn: Conn) -> Policies:
    return policies(conn.execute(DEFAULT_POLICY).fetchone(), conn.execute(USER_POLICIES).fetchall())


class PostgresExpiry(PostgresBase):
    """TTLs and retention in a PostgreSQL store."""

    def set_ttl(self, user: str, change: TtlChange) -> int:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            params: dict[str, object] = {"u": user_id, "now": change.now, "ttl": change.ttl_s}
            where = f"b.user_id = %(u)s AND {LIVE}"
            if change.session_id is not None:
                if session_row(conn, user_id, change.session_id) is None:
                    raise NotFoundError(f"session {change.session_id!r} not found for user {user!r}")
                where += " AND b.session_id = %(s)s"
                params["s"] = change.session_id
            if change.block_ids is not None:
                where += " AND b.id = ANY(%(ids)s::text[])"
                params["ids"] = list(change.block_ids)
            return int(
                conn.execute(
                    "UPDATE blocks b SET ttl_s = %(ttl)s, "
                    f"expires_ts = CASE WHEN %(ttl)s = 0 THEN NULL ELSE %(now)s + %(ttl)s END WHERE {where}",
                    params,
                ).rowcount
            )

    def expired_users(self, now: float) -> list[str]:
        """Found through the partial index of blocks with an expiry."""
        rows = self.query(
            "SELECT u.name FROM users u WHERE u.id IN (SELECT DISTINCT user_id FROM blocks WHERE expires_ts <= %s) "
            "ORDER BY u.name",
            (now,),
        )
        return [str(r[0]) for r in rows]

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                return []
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = %s AND expires_ts <= %s ORDER BY expires_ts, pk LIMIT %s",
                    (user_id, now, limit),
                ).fetchall()
            ]
            blocks = blocks_by_pk(conn, user_id, pks)
            if not dry_run:
                delete_blocks(conn, user_id, pks)
        return blocks

    def retention_policies(self) -> Policies:
        with self.transaction() as conn:
            return read_policies(conn)

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        now = to_epoch(now_utc())
        with self.transaction() as conn:
            user_id = None if user is None else self._lock_user(conn, user, create=False)
            conn.execute(*policy_statement(DELETE_POLICY, UPSERT_POLICY, user, user_id, policy, now))

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        """The user's blocks older than ``before`` (event time) or beyond the ``keep`` newest, at most
        ``limit`` of them, decided and (unless ``dry_run``) deleted in one transaction that holds the user's
        row lock: an add of the same user commits before (and is counted among the newest) or after (and
        was not seen); an unknown user has none."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                return Expired(0, [], 0)
            pks = expired_pks(conn, user_id, before, keep, limit)
            blocks = [] if dry_run else blocks_by_pk(conn, user_id, pks)
            if not dry_run:
                delete_blocks(conn, user_id, pks)
            remaining = count_blocks(conn, user_id) - (len(pks) if dry_run else 0)
        return Expired(len(pks), blocks, remaining)
