"""Users in the SQLite store: names, display names and metadata, the deletion epoch and the names' tombstones
(:mod:`memlane.core.store.users.deletions`), and deleting a user with everything of theirs. Each function is a
statement or two inside the caller's transaction; :class:`SqliteUsers` is the store's
:class:`memlane.core.store.users.Users`."""

from __future__ import annotations

import sqlite3
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
from memlane.core.store.blocks.sqlite_rows import LIVE, json_path, live_count
from memlane.core.store.sqlite.ann import drop_user
from memlane.core.store.sqlite.base import SqliteBase, json_text, json_value, time_now
from memlane.core.store.sqlite.keys import delete_keys
from memlane.core.store.users import UserQuery, UserRules, user_where
from memlane.core.store.users.deletions import TOMBSTONE_RETENTION_S, VERSION_EPOCH_SHIFT, check_write, name_sha256
from memlane.core.timefmt import from_epoch, now_utc, to_epoch

USER_COLUMNS = (
    "u.name, u.created_at, u.display_name, u.metadata, " + live_count("b.user_id = u.id") + ", "
    "(SELECT count(*) FROM sessions s WHERE s.user_id = u.id), "
    "(SELECT max(b.ingest_ts) FROM blocks b WHERE b.user_id = u.id AND " + LIVE + ")"
)


def user_info(row: Sequence[Any]) -> UserInfo:
    name, created, display, metadata, blocks, sessions, last = row
    return UserInfo(
        name=str(name),
        blocks=int(blocks),
        created_at=from_epoch(float(created)),
        display_name=None if display is None else str(display),
        metadata=dict(json_value(metadata)),
        sessions=int(sessions),
        last_activity=None if last is None else from_epoch(float(last)),
    )


def get_user(conn: sqlite3.Connection, user: str, now: float) -> UserInfo:
    row = conn.execute(f"SELECT {USER_COLUMNS} FROM users u WHERE u.name = ?", (now, now, user)).fetchone()
    if row is None:
        raise NotFoundError(f"user {user!r} not found")
    return user_info(row)


def set_user_fields(
    conn: sqlite3.Connection, user_id: int, display_name: str | None, metadata: Mapping[str, Any] | None
) -> None:
    if display_name is not None:
        conn.execute("UPDATE users SET display_name = ? WHERE id = ?", (display_name or None, user_id))
    if metadata is not None:
        conn.execute("UPDATE users SET metadata = ? WHERE id = ?", (json_text(metadata), user_id))


# SQLite's LIKE ignores the case of ASCII letters. Metadata is compared as JSON, and read as text through its
# JSON type: a string as itself, a number or a boolean as its JSON text; never a list, an object or null.
RULES = UserRules(
    everyone="1 = 1",
    display_name="u.display_name = ?",
    contains="(u.name LIKE ? ESCAPE '\\' OR u.display_name LIKE ? ESCAPE '\\')",
    metadata="(u.metadata -> ?) = ?",
    metadata_text=(
        "CASE json_type(u.metadata, ?) WHEN 'text' THEN u.metadata ->> ? "
        "WHEN 'array' THEN NULL WHEN 'object' THEN NULL WHEN 'null' THEN NULL ELSE u.metadata -> ? END = ?"
    ),
    key=json_path,
    text_keys=3,
)


def find_users(conn: sqlite3.Connection, query: UserQuery, now: float) -> Page[UserInfo]:
    clause, params = user_where(query, RULES)
    limit, offset = query.limit, query.offset
    total = int(conn.execute(f"SELECT count(*) FROM users u WHERE {clause}", params).fetchone()[0])
    rows = conn.execute(
        f"SELECT {USER_COLUMNS} FROM users u WHERE {clause} ORDER BY u.name LIMIT ? OFFSET ?",
        [now, now, *params, limit, offset],
    ).fetchall()
    return Page([user_info(r) for r in rows], total, limit, offset)


EPOCH = "(SELECT epoch FROM deletion_epoch WHERE id = 1)"


def ensure_user(conn: sqlite3.Connection, user: str, created_at: float, since: int | None) -> tuple[int, int, bool]:
    """Inside a write transaction: refuse if ``user`` was deleted after epoch ``since``, then create the user
    unless it exists. Returns (id, version, created)."""
    tombstone, pruned_upto = conn.execute(
        "SELECT (SELECT epoch FROM user_deletions WHERE name_sha256 = ?), pruned_upto FROM deletion_epoch WHERE id = 1",
        (name_sha256(user),),
    ).fetchone()
    check_write(user, since, tombstone, int(pruned_upto))
    cur = conn.execute(
        f"INSERT OR IGNORE INTO users(name, created_at, version) VALUES (?, ?, {EPOCH} << {VERSION_EPOCH_SHIFT})",
        (user, created_at),
    )
    user_id, version = conn.execute("SELECT id, version FROM users WHERE name = ?", (user,)).fetchone()
    return int(user_id), int(version), cur.rowcount == 1


def record_deletion(conn: sqlite3.Connection, user: str, now: float) -> None:
    """Inside ``delete_user``'s transaction: raise the epoch, write the name's tombstone, prune old ones."""
    pruned = conn.execute(
        "DELETE FROM user_deletions WHERE deleted_at < ? RETURNING epoch", (now - TOMBSTONE_RETENTION_S,)
    ).fetchall()
    (epoch,) = conn.execute(
        "UPDATE deletion_epoch SET epoch = epoch + 1, pruned_upto = max(pruned_upto, ?) WHERE id = 1 RETURNING epoch",
        (max((int(r[0]) for r in pruned), default=0),),
    ).fetchone()
    conn.execute(
        "INSERT INTO user_deletions(name_sha256, epoch, deleted_at) VALUES (?, ?, ?) "
        "ON CONFLICT(name_sha256) DO UPDATE SET epoch = excluded.epoch, deleted_at = excluded.deleted_at",
        (name_sha256(user), int(epoch), now),
    )


def deletion_epoch(conn: sqlite3.Connection) -> int:
    return int(conn.execute(f"SELECT {EPOCH}").fetchone()[0])


class SqliteUsers(SqliteBase):
    """The users of a SQLite store."""

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        with self._write() as conn:
            user_id, _, created = ensure_user(conn, user, to_epoch(now_utc()), None)
            if created:
                set_user_fields(conn, user_id, display_name, metadata)
            return created

    def deletion_epoch(self) -> int:
        """The store's deletion epoch: what an add reads before its slow part (core/store/users/deletions.py)."""
        return deletion_epoch(self._conn())

    def list_users(self) -> list[UserInfo]:
        now = time_now()
        rows = self._read(f"SELECT {USER_COLUMNS} FROM users u ORDER BY u.name", (now, now))
        return [user_info(r) for r in rows]

    def delete_user(self, user: str) -> DeletedUser:
        """Remove the user and everything of theirs (blocks, search keys, vectors, term rows, the terms only
        they used, cached vectors no other user shares, API keys), and record the deletion so that no add
        in flight brings them back. NotFoundError for an unknown user."""
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                raise NotFoundError(f"user {user!r} not found")
            user_id = int(row[0])
            conn.execute(
                "DELETE FROM embed_cache WHERE hash IN (SELECT content_hash FROM search_keys WHERE user_id = ?) "
                "AND hash NOT IN (SELECT content_hash FROM search_keys WHERE user_id != ?)",
                (user_id, user_id),
            )
            delete_keys(conn, "user_id = ?", (user_id,))
            conn.execute("DELETE FROM key_segments WHERE user_id = ?", (user_id,))  # what retired keys still held
            conn.execute("DELETE FROM dead_keys WHERE user_id = ?", (user_id,))
            n = conn.execute("DELETE FROM blocks WHERE user_id = ?", (user_id,)).rowcount
            conn.execute("DELETE FROM jobs WHERE user_id = ?", (user_id,))
            drop_user(conn, self.path, user_id)
            keys = conn.execute("DELETE FROM api_keys WHERE user_id = ?", (user_id,)).rowcount
            conn.execute("DELETE FROM retention_policies WHERE user_id = ?", (user_id,))
            conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))
            conn.execute("DELETE FROM users WHERE id = ?", (user_id,))
            record_deletion(conn, user, to_epoch(now_utc()))
        self.cache_drop(user_id)
        self.ann.forget(user_id)
        self.checkpoint()
        return DeletedUser(blocks=int(n), keys=int(keys))

    def get_user(self, user: str) -> UserInfo:
        info: UserInfo = self._read_with(get_user, user, time_now())
        return info

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        with self._write() as conn:
            set_user_fields(conn, self._require_user_id(conn, user), display_name, metadata)
        return self.get_user(user)

    def find_users(self, query: UserQuery) -> Page[UserInfo]:
        page: Page[UserInfo] = self._read_with(find_users, query, time_now())
        return page

    def user_row_counts(self, user: str) -> dict[str, int]:
        """Rows each table holds for ``user`` (by name or by its namespace token): for deletion checks."""
        out: dict[str, int] = {}
        row = self._user_row(user)
        uid = row[0] if row else -1
        for table in (
            "blocks", "search_keys", "key_segments", "jobs", "api_keys", "retention_policies", "ann_index", "sessions",
        ):  # fmt: skip
            out[table] = int(self._read(f"SELECT count(*) FROM {table} WHERE user_id = ?", (uid,))[0][0])
        # Keys whose vector and term bag the user's segments hold (the rows of PostgreSQL's key_vectors)
        keys = int(self._read("SELECT coalesce(sum(keys), 0) FROM key_segments WHERE user_id = ?", (uid,))[0][0])
        out["key_vectors"] = out["key_terms"] = keys
        out["users"] = int(self._read("SELECT count(*) FROM users WHERE name = ?", (user,))[0][0])
        return out
