"""What makes blocks go by themselves in the PostgreSQL store: TTLs (set, and the sweep of expired blocks) and
retention policies (by age or count), each inside a transaction that holds the user's row lock.
:class:`PostgresExpiry` is the store's :class:`memlane.core.store.expiry.Expiry`."""

from __future__ import annotations

from collections.abc import Sequence

from memlane.core.errors import NotFoundError
from memlane.core.model import (
    MemoryBlock,
)
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.blocks.postgres_rows import LIVE, blocks_by_pk, count_blocks, delete_blocks, expired_pks
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.sessions.postgres import session_row


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


class PostgresExpiry(PostgresBase):
    """TTLs and retention in a PostgreSQL store."""

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
        now: float,
    ) -> int:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            params: dict[str, object] = {"u": user_id, "now": now, "ttl": ttl_s}
            where = f"b.user_id = %(u)s AND {LIVE}"
            if session_id is not None:
                if session_row(conn, user_id, session_id) is None:
                    raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
                where += " AND b.session_id = %(s)s"
                params["s"] = session_id
            if block_ids is not None:
                where += " AND b.id = ANY(%(ids)s::text[])"
                params["ids"] = list(block_ids)
            return int(
                conn.execute(
                    "UPDATE blocks b SET ttl_s = %(ttl)s, "
                    f"expires_ts = CASE WHEN %(ttl)s = 0 THEN NULL ELSE %(now)s + %(ttl)s END WHERE {where}",
                    params,
                ).rowcount
            )

    def expired_users(self, now: float) -> list[str]:
        """Users with a block whose TTL ran out (through the partial index of blocks with an expiry)."""
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
        with self.transaction() as conn:
            user_id = None if user is None else self._lock_user(conn, user, create=False)
            write_policy(conn, user_id, user, policy)

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
