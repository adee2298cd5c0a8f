"""Users' lifecycle in the PostgreSQL store: deletion epochs and tombstones (:mod:`memlane.core.store.deletions`)
and API keys, each a statement or two inside the caller's transaction.

Only ``delete_user`` writes the one ``deletion_epoch`` row, after it has locked the user's row (the lock
order users, then the epoch), so deletions of different users queue there for the length of a commit and
nothing else waits on it: an add only reads it, before its transaction."""

from __future__ import annotations

from memlane.core.errors import NotFoundError
from memlane.core.model import KeyRecord, StoredKey
from memlane.core.store.deletions import TOMBSTONE_RETENTION_S, check_write, name_sha256
from memlane.core.store.postgres.keys import Conn
from memlane.core.store.postgres.tenant import user_key

NOW = "extract(epoch FROM now())"
EPOCH = "(SELECT epoch FROM deletion_epoch WHERE id = 1)"


# The epoch of the name's last deletion (if its tombstone is kept) and the highest pruned one: check_write's
# inputs.
DELETED_SINCE = (
    "SELECT (SELECT epoch FROM user_deletions WHERE name_sha256 = %(name_sha256)s), pruned_upto FROM deletion_epoch "
    "WHERE id = 1"
)


def check_not_deleted(conn: Conn, user: str, since: int | None) -> None:
    """Refuse a write for ``user`` begun at epoch ``since`` if the user was deleted after it. Run once the
    write holds the user's row (or created it): a statement sees every commit before it starts, so a
    deletion the write waited for is seen here."""
    if since is None:
        return
    row = conn.execute(DELETED_SINCE, {"name_sha256": name_sha256(user)}).fetchone()
    assert row is not None
    check_write(user, since, None if row[0] is None else int(row[0]), int(row[1]))


def record_deletion(conn: Conn, user: str) -> None:
    """Inside ``delete_user``'s transaction: raise the epoch, write the name's tombstone, prune old ones."""
    pruned = conn.execute(
        f"DELETE FROM user_deletions WHERE deleted_at < {NOW} - %s RETURNING epoch", (TOMBSTONE_RETENTION_S,)
    ).fetchall()
    row = conn.execute(
        "UPDATE deletion_epoch SET epoch = epoch + 1, pruned_upto = GREATEST(pruned_upto, %s) WHERE id = 1 "
        "RETURNING epoch",
        (max((int(r[0]) for r in pruned), default=0),),
    ).fetchone()
    assert row is not None
    conn.execute(
        f"INSERT INTO user_deletions(name_sha256, epoch, deleted_at) VALUES (%s, %s, {NOW}) "
        "ON CONFLICT (name_sha256) DO UPDATE SET epoch = EXCLUDED.epoch, deleted_at = EXCLUDED.deleted_at",
        (name_sha256(user), int(row[0])),
    )


def deletion_epoch(conn: Conn) -> int:
    row = conn.execute(f"SELECT {EPOCH}").fetchone()
    assert row is not None
    return int(row[0])


def add_key(
    conn: Conn, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
) -> bool:
    """Store a key of an existing user (NotFoundError otherwise); False if ``key_id`` is taken. The user's
    row is locked first, so a concurrent deletion either comes after (and takes the key) or before (and
    the user is not found)."""
    row = conn.execute(
        "SELECT id FROM users WHERE id = %s AND name = %s FOR NO KEY UPDATE", (user_key(user), user)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"user {user!r} not found")
    cur = conn.execute(
        "INSERT INTO api_keys(user_id, key_id, secret_sha256, label, created_at, role) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (key_id) DO NOTHING",
        (int(row[0]), key_id, secret_sha256, label, created_at, role),
    )
    return cur.rowcount == 1


def get_key(conn: Conn, key_id: str) -> StoredKey | None:
    """The key and the deletion epoch, read by one statement (one snapshot)."""
    row = conn.execute(
        f"SELECT k.key_id, k.user_id, k.label, k.created_at, k.secret_sha256, {EPOCH}, k.role "
        "FROM api_keys k WHERE k.key_id = %s",
        (key_id,),
    ).fetchone()
    if row is None:
        return None
    # The user's name from the user's own row (one node on a distributed store: api_keys is copied to
    # every node, users is not).
    owner = conn.execute("SELECT name FROM users WHERE id = %s", (int(row[1]),)).fetchone()
    if owner is None:
        return None
    row = (row[0], owner[0], *row[2:])
    record = KeyRecord(
        key_id=str(row[0]), user=str(row[1]), label=str(row[2]), created_at=float(row[3]), role=str(row[6])
    )
    return StoredKey(record=record, secret_sha256=str(row[4]), epoch=int(row[5]))


def list_keys(conn: Conn, user: str) -> list[KeyRecord]:
    rows = conn.execute(
        "SELECT k.key_id, %s, k.label, k.created_at, k.role FROM api_keys k WHERE k.user_id = %s "
        "AND EXISTS (SELECT 1 FROM users u WHERE u.id = %s AND u.name = %s) ORDER BY k.created_at, k.key_id",
        (user, user_key(user), user_key(user), user),
    ).fetchall()
    return [
        KeyRecord(key_id=str(r[0]), user=str(r[1]), label=str(r[2]), created_at=float(r[3]), role=str(r[4]))
        for r in rows
    ]


def revoke_key(conn: Conn, user: str, key_id: str) -> bool:
    cur = conn.execute("DELETE FROM api_keys WHERE key_id = %s AND user_id = %s", (key_id, user_key(user)))
    return cur.rowcount == 1
