"""Users in the PostgreSQL store: names, display names and metadata, and deleting a user with everything of theirs.

Every statement names one user's id; counts over a user's blocks are separate uncorrelated statements, never
subqueries correlated with the shared ``users`` table (which a distributed PostgreSQL cannot plan:
docs/scaling.md). :class:`PostgresUsers` is the store's :class:`memlane.core.store.users.Users`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memlane.core.errors import (
    NotFoundError,
)
from memlane.core.model import (
    DeletedUser,
    Page,
    UserInfo,
)
from memlane.core.store.blocks.postgres_rows import drop_cached, now_epoch
from memlane.core.store.postgres import ann, citus
from memlane.core.store.postgres.base import PostgresBase, refuse_collision
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.tenant import user_key
from memlane.core.store.users import UserQuery, UserRules, user_where
from memlane.core.store.users.postgres_rows import deletion_epoch, record_deletion
from memlane.core.timefmt import from_epoch, now_utc, to_epoch


def json_object(value: Any) -> dict[str, Any]:
    return dict(json.loads(value) if isinstance(value, str | bytes) else value or {})


def user_infos(conn: Conn, rows: Sequence[tuple[Any, ...]], now: float) -> list[UserInfo]:
    """Users from rows of (id, name, created_at, display_name, metadata), with their live block count,
    session count and last activity (the ingest time of their newest block): one grouped statement per
    table for all of them, keyed by the users' ids."""
    ids = [int(r[0]) for r in rows]
    blocks: dict[int, tuple[int, float | None]] = {}
    sessions: dict[int, int] = {}
    if ids:
        blocks = {
            int(u): (int(n), None if last is None else float(last))
            for u, n, last in conn.execute(
                "SELECT user_id, count(*) FILTER (WHERE expires_ts IS NULL OR expires_ts > %s), max(ingest_ts) "
                "FROM blocks WHERE user_id = ANY(%s::bigint[]) GROUP BY user_id",
                (now, ids),
            ).fetchall()
        }
        sessions = {
            int(u): int(n)
            for u, n in conn.execute(
                "SELECT user_id, count(*) FROM sessions WHERE user_id = ANY(%s::bigint[]) GROUP BY user_id", (ids,)
            ).fetchall()
        }
    out = []
    for uid, name, created, display, metadata in rows:
        n, last = blocks.get(int(uid), (0, None))
        out.append(
            UserInfo(
                name=str(name),
                blocks=n,
                created_at=from_epoch(float(created)),
                display_name=None if display is None else str(display),
                metadata=json_object(metadata),
                sessions=sessions.get(int(uid), 0),
                last_activity=None if last is None else from_epoch(last),
            )
        )
    return out


_USER_ROW = "SELECT id, name, created_at, display_name, metadata FROM users"


def get_user(conn: Conn, user: str, now: float) -> UserInfo:
    rows = conn.execute(f"{_USER_ROW} WHERE id = %s AND name = %s", (user_key(user), user)).fetchall()
    if not rows:
        raise NotFoundError(f"user {user!r} not found")
    return user_infos(conn, rows, now)[0]


def update_user(conn: Conn, user_id: int, *, display_name: str | None, metadata: Mapping[str, Any] | None) -> None:
    if display_name is not None:
        conn.execute(
            "UPDATE users SET display_name = %s WHERE id = %s", (display_name if display_name != "" else None, user_id)
        )
    if metadata is not None:
        conn.execute("UPDATE users SET metadata = %s::jsonb WHERE id = %s", (json.dumps(dict(metadata)), user_id))


# ILIKE folds case as the database's locale does. Metadata is compared as JSON (equal, not contained: [1] is not
# [1, 2]), and read as text through its JSON type: never a list, an object or null.
RULES = UserRules(
    everyone="true",
    display_name="display_name = %s",
    contains="(name ILIKE %s ESCAPE '\\' OR display_name ILIKE %s ESCAPE '\\')",
    metadata="metadata -> %s = %s::jsonb",
    metadata_text="jsonb_typeof(metadata -> %s) IN ('string', 'number', 'boolean') AND metadata ->> %s = %s",
    key=str,
    text_keys=2,
)


def find_users(conn: Conn, query: UserQuery, now: float) -> Page[UserInfo]:
    clause, params = user_where(query, RULES)
    limit, offset = query.limit, query.offset
    total = conn.execute(f"SELECT count(*) FROM users WHERE {clause}", params).fetchone()
    rows = conn.execute(
        f"{_USER_ROW} WHERE {clause} ORDER BY name LIMIT %s OFFSET %s", [*params, limit, offset]
    ).fetchall()
    return Page(user_infos(conn, rows, now), int(total[0]) if total else 0, limit, offset)


class PostgresUsers(PostgresBase):
    """The users of a PostgreSQL store."""

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        user_id = user_key(user)
        with self.transaction() as conn:
            row = conn.execute(
                "INSERT INTO users(id, name, created_at, display_name, metadata) VALUES (%s, %s, %s, %s, %s::jsonb) "
                "ON CONFLICT DO NOTHING RETURNING id",  # either unique index: see _lock_user
                (user_id, user, to_epoch(now_utc()), display_name or None, json.dumps(dict(metadata or {}))),
            ).fetchone()
            if row is None:
                refuse_collision(conn, user_id, user)
        return row is not None

    def list_users(self) -> list[UserInfo]:
        """Every namespace with its (live) block count, by name."""
        with self.transaction() as conn:
            rows = conn.execute(
                "SELECT id, name, created_at, display_name, metadata FROM users ORDER BY name"
            ).fetchall()
            return user_infos(conn, rows, now_epoch())

    def get_user(self, user: str) -> UserInfo:
        with self.transaction() as conn:
            return get_user(conn, user, now_epoch())

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            update_user(conn, user_id, display_name=display_name, metadata=metadata)
            return get_user(conn, user, now_epoch())

    def find_users(self, query: UserQuery) -> Page[UserInfo]:
        with self.transaction() as conn:
            return find_users(conn, query, now_epoch())

    def delete_user(self, user: str) -> DeletedUser:
        """Remove the user and everything of theirs (blocks, search keys, vectors, tsvectors, jobs, cached
        vectors no other user shares, API keys), and record the deletion so that no add in flight brings
        them back. NotFoundError if unknown."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            conn.execute("DELETE FROM jobs WHERE user_id = %s", (user_id,))
            drop_cached(conn, user_id, None)
            conn.execute("DELETE FROM key_vectors WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM search_keys WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM session_terms WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM session_lengths WHERE user_id = %s", (user_id,))
            n = conn.execute("DELETE FROM blocks WHERE user_id = %s", (user_id,)).rowcount
            conn.execute("DELETE FROM sessions WHERE user_id = %s", (user_id,))
            keys = conn.execute("DELETE FROM api_keys WHERE user_id = %s", (user_id,)).rowcount
            conn.execute("DELETE FROM retention_policies WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM llm_calls WHERE user_id = %s", (user_id,))
            row = conn.execute("DELETE FROM users WHERE id = %s RETURNING n_keys", (user_id,)).fetchone()
            ann.drop_user(conn, user_id)
            record_deletion(conn, user)
        if self.citus and row is not None and self.ann_settings.applies(int(row[0])):
            citus.drop_ann(self, user_id)  # a worker's index is out of the deletion's reach
        return DeletedUser(blocks=int(n), keys=int(keys))

    def deletion_epoch(self) -> int:
        """The store's deletion epoch: what an add reads before its slow part (core/store/users/deletions.py)."""
        with self.single() as conn:
            return deletion_epoch(conn)

    def user_row_counts(self, user: str) -> dict[str, int]:
        """Rows each table holds for ``user``: for deletion checks."""
        uid = user_key(user)
        rows = self.query("SELECT id FROM users WHERE id = %s AND name = %s", (uid, user))
        out = {
            table: int(self.query(f"SELECT count(*) FROM {table} WHERE user_id = %s", (uid,))[0][0])
            for table in (
                "blocks",
                "search_keys",
                "key_vectors",
                "jobs",
                "session_terms",
                "session_lengths",
                "sessions",
                "api_keys",
                "retention_policies",
                "llm_calls",
            )
        }
        out["users"] = len(rows)
        place = self._ann_place(uid)
        with place.connect() as conn:
            out["ann_index"] = int(ann.index_state(conn, place.index) != "none")
        return out
