"""Users' lifecycle in the SQLite store: deletion epochs and tombstones (:mod:`memlane.core.store.deletions`)
and API keys, each a statement or two inside the caller's transaction."""

from __future__ import annotations

import sqlite3

from memlane.core.errors import NotFoundError
from memlane.core.model import KeyRecord, StoredKey
from memlane.core.store.deletions import TOMBSTONE_RETENTION_S, VERSION_EPOCH_SHIFT, check_write, name_sha256

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


def move_interface_keys(conn: sqlite3.Connection) -> None:
    """Migration 7: the keys an earlier HTTP service kept in its own table (``http_api_keys``, by user
    name) move into ``api_keys``. Keys of names with no user left are those of users deleted outside the
    service, which the old table kept by mistake: they are dropped, not moved."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'http_api_keys'").fetchone() is None:
        return
    conn.execute(
        "INSERT OR IGNORE INTO api_keys(key_id, user_id, secret_sha256, label, created_at) "
        "SELECT k.key_id, u.id, k.secret_sha256, k.label, k.created_at FROM http_api_keys k "
        "JOIN users u ON u.name = k.user"
    )
    conn.execute("DROP TABLE http_api_keys")
