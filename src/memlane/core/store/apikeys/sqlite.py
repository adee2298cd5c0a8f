"""API keys in the SQLite store, each a statement or two inside the caller's transaction. :class:`SqliteApiKeys` is
the store's :class:`memlane.core.store.apikeys.ApiKeys`."""

from __future__ import annotations

import sqlite3

from memlane.core.errors import (
    NotFoundError,
)
from memlane.core.model import (
    KeyRecord,
    StoredKey,
)
from memlane.core.store.sqlite.base import SqliteBase
from memlane.core.store.sqlite.probe import store_error
from memlane.core.store.users.sqlite import EPOCH


def add_key(
    conn: sqlite3.Connection,
    user: str,
    key_id: str,
    secret_sha256: str,
    label: str,
    created_at: float,
    role: str = "read-write",
) -> bool:
    """Store a key of an existing user (NotFoundError otherwise); False if ``key_id`` is taken."""
    row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
    if row is None:
        raise NotFoundError(f"user {user!r} not found")
    cur = conn.execute(
        "INSERT OR IGNORE INTO api_keys(key_id, user_id, secret_sha256, label, created_at, role) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (key_id, int(row[0]), secret_sha256, label, created_at, role),
    )
    return cur.rowcount == 1


def get_key(conn: sqlite3.Connection, key_id: str) -> StoredKey | None:
    """The key and the deletion epoch, read by one statement (one snapshot)."""
    row = conn.execute(
        f"SELECT k.key_id, u.name, k.label, k.created_at, k.secret_sha256, {EPOCH}, k.role "
        "FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_id = ?",
        (key_id,),
    ).fetchone()
    if row is None:
        return None
    record = KeyRecord(
        key_id=str(row[0]), user=str(row[1]), label=str(row[2]), created_at=float(row[3]), role=str(row[6])
    )
    return StoredKey(record=record, secret_sha256=str(row[4]), epoch=int(row[5]))


def list_keys(conn: sqlite3.Connection, user: str) -> list[KeyRecord]:
    rows = conn.execute(
        "SELECT k.key_id, u.name, k.label, k.created_at, k.role FROM api_keys k JOIN users u ON u.id = k.user_id "
        "WHERE u.name = ? ORDER BY k.created_at, k.key_id",
        (user,),
    ).fetchall()
    return [
        KeyRecord(key_id=str(r[0]), user=str(r[1]), label=str(r[2]), created_at=float(r[3]), role=str(r[4]))
        for r in rows
    ]


def revoke_key(conn: sqlite3.Connection, user: str, key_id: str) -> bool:
    cur = conn.execute(
        "DELETE FROM api_keys WHERE key_id = ? AND user_id = (SELECT id FROM users WHERE name = ?)", (key_id, user)
    )
    return cur.rowcount == 1


class SqliteApiKeys(SqliteBase):
    """API keys in a SQLite store."""

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        with self._write() as conn:
            return add_key(conn, user, key_id, secret_sha256, label, created_at, role)

    def get_api_key(self, key_id: str) -> StoredKey | None:
        try:
            return get_key(self._conn(), key_id)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def list_api_keys(self, user: str) -> list[KeyRecord]:
        try:
            return list_keys(self._conn(), user)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        with self._write() as conn:
            return revoke_key(conn, user, key_id)
