"""Users' lifecycle statements in the PostgreSQL store: the deletion epoch and the names' tombstones
(:mod:`memlane.core.store.users.deletions`), each inside the caller's transaction, for the store's rooms and its
functions on Citus (:mod:`memlane.core.store.postgres.delegated`).

Only ``delete_user`` writes the one ``deletion_epoch`` row, after it has locked the user's row (the lock order
users, then the epoch), so deletions of different users queue there for the length of a commit and nothing else
waits on it: an add only reads it, before its transaction."""

from __future__ import annotations

from memlane.core.store.postgres.dialect import NOW, Conn
from memlane.core.store.users.deletions import TOMBSTONE_RETENTION_S, check_write, name_sha256

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
