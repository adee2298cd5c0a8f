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
from memlane.core.store.apikeys import key_record, stored_key
from memlane.core.store.sqlite.base import SqliteBase
from memlane.core.store.users.sqlite import EPOCH


def add_key(conn: sqlite3.Connection, record: KeyRecord, secret_sha256: str) -> bool:
    row = conn.execute("SELECT id FROM users WHERE name = ?", (record.user,)).fetchone()
    if row is None:
        raise NotFoundError(f"user {record.user!r} not found")
    cur = conn.execute(
        "INSERT OR IGNORE INTO api_keys(key_id, user_id, secret_sha256, label, created_at, role) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (record.key_id, int(row[0]), secret_sha256, record.label, record.created_at, record.role),
    )
    return cur.rowcount == 1


def get_key(conn: sqlite3.Connection, key_id: str) -> StoredKey | None:
    row = conn.execute(
        f"SELECT k.key_id, u.name, k.label, k.created_at, k.role, k.secret_sha256, {EPOCH} "
        "FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_id = ?",
        (key_id,),
    ).fetchone()
    return None if row is None else stored_key(row)


def list_keys(conn: sqlite3.Connection, user: str) -> list[KeyRecord]:
    rows = conn.execute(
        "SELECT k.key_id, u.name, k.label, k.created_at, k.role FROM api_keys k JOIN users u ON u.id = k.user_id "
        "WHERE u.name = ? ORDER BY k.created_at, k.key_id",
        (user,),
    ).fetchall()
    return [key_record(r) for r in rows]


def revoke_key(conn: sqlite3.Connection, user: str, key_id: str) -> bool:
    cur = conn.execute(
        "DELETE FROM api_keys WHERE key_id = ? AND user_id = (SELECT id FROM users WHERE name = ?)", (key_id, user)
    )
    return cur.rowcount == 1


class SqliteApiKeys(SqliteBase):
    """API keys in a SQLite store."""

    def add_api_key(self, record: KeyRecord, secret_sha256: str) -> bool:
        with self._write() as conn:
            return add_key(conn, record, secret_sha256)

    def get_api_key(self, key_id: str) -> StoredKey | None:
        found: StoredKey | None = self._read_with(get_key, key_id)
        return found

    def list_api_keys(self, user: str) -> list[KeyRecord]:
        keys: list[KeyRecord] = self._read_with(list_keys, user)
        return keys

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        with self._write() as conn:
            return revoke_key(conn, user, key_id)
