"""API keys in the PostgreSQL store, each a statement or two inside the caller's transaction.
:class:`PostgresApiKeys` is the store's :class:`memlane.core.store.apikeys.ApiKeys`."""

from __future__ import annotations

from memlane.core.errors import NotFoundError
from memlane.core.model import (
    KeyRecord,
    StoredKey,
)
from memlane.core.store.apikeys import key_record, stored_key
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.tenant import user_key
from memlane.core.store.users.postgres_rows import EPOCH


def add_key(conn: Conn, record: KeyRecord, secret_sha256: str) -> bool:
    """The user's row is locked first, so a concurrent deletion either comes after (and takes the key) or
    before (and the user is not found)."""
    row = conn.execute(
        "SELECT id FROM users WHERE id = %s AND name = %s FOR NO KEY UPDATE", (user_key(record.user), record.user)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"user {record.user!r} not found")
    cur = conn.execute(
        "INSERT INTO api_keys(user_id, key_id, secret_sha256, label, created_at, role) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (key_id) DO NOTHING",
        (int(row[0]), record.key_id, secret_sha256, record.label, record.created_at, record.role),
    )
    return cur.rowcount == 1


def get_key(conn: Conn, key_id: str) -> StoredKey | None:
    row = conn.execute(
        f"SELECT k.key_id, k.user_id, k.label, k.created_at, k.role, k.secret_sha256, {EPOCH} "
        "FROM api_keys k WHERE k.key_id = %s",
        (key_id,),
    ).fetchone()
    if row is None:
        return None
    # The user's name from the user's own row (one node on a distributed store: api_keys is copied to
    # every node, users is not).
    owner = conn.execute("SELECT name FROM users WHERE id = %s", (int(row[1]),)).fetchone()
    return None if owner is None else stored_key((row[0], owner[0], *row[2:]))


def list_keys(conn: Conn, user: str) -> list[KeyRecord]:
    rows = conn.execute(
        "SELECT k.key_id, %s, k.label, k.created_at, k.role FROM api_keys k WHERE k.user_id = %s "
        "AND EXISTS (SELECT 1 FROM users u WHERE u.id = %s AND u.name = %s) ORDER BY k.created_at, k.key_id",
        (user, user_key(user), user_key(user), user),
    ).fetchall()
    return [key_record(r) for r in rows]


def revoke_key(conn: Conn, user: str, key_id: str) -> bool:
    cur = conn.execute("DELETE FROM api_keys WHERE key_id = %s AND user_id = %s", (key_id, user_key(user)))
    return cur.rowcount == 1


class PostgresApiKeys(PostgresBase):
    """API keys in a PostgreSQL store."""

    def add_api_key(self, record: KeyRecord, secret_sha256: str) -> bool:
        with self.transaction() as conn:
            return add_key(conn, record, secret_sha256)

    def get_api_key(self, key_id: str) -> StoredKey | None:
        with self.transaction() as conn:
            return get_key(conn, key_id)

    def list_api_keys(self, user: str) -> list[KeyRecord]:
        with self.transaction() as conn:
            return list_keys(conn, user)

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        with self.transaction() as conn:
            return revoke_key(conn, user, key_id)
