"""Deletion epochs: why work in flight cannot bring a deleted user back (docs/design/005-user-lifecycle.md).

Every store keeps a counter, the *deletion epoch*, raised by each ``delete_user`` in its own transaction,
and a *tombstone* per deleted name: the SHA-256 of the name and the epoch of its last deletion. An add
reads the epoch before its slow part (validation and embedding); its write transaction refuses, with
:class:`~memlane.core.errors.UserDeletedError`, when the name's tombstone is newer than what it read: the
user was deleted after the add started, so the add must not recreate them. An add that starts after the
delete returned reads the new epoch and creates the user afresh.

Tombstones older than :data:`TOMBSTONE_RETENTION_S` are pruned by later deletions, and the highest pruned
epoch is kept: an add that read an epoch below it (one that took longer than the retention) can no longer
be told apart from one that raced a deletion, so it is refused as well.
"""

from __future__ import annotations

import hashlib

from memlane.core.errors import UserDeletedError

TOMBSTONE_RETENTION_S = 24 * 3600.0
# A new user's change counter starts at (deletion epoch << 32): a SQLite user id freed by a deletion can be
# handed out again, and a process that cached the deleted user's index under (id, version) must never see
# the new user reach the same version.
VERSION_EPOCH_SHIFT = 32


def name_sha256(user: str) -> str:
    """The tombstone's key: the name itself is not kept after the user is deleted."""
    return hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()


def check_write(user: str, since: int | None, tombstone: int | None, pruned_upto: int) -> None:
    """Refuse a write for ``user`` that began at deletion epoch ``since`` if the user was deleted after
    that (``tombstone``: the epoch of the name's last deletion, if one is kept; ``pruned_upto``: the highest
    epoch of a pruned tombstone). ``since`` None: the write began inside its own transaction."""
    if since is None:
        return
    if (tombstone is not None and tombstone > since) or since < pruned_upto:
        raise deleted_in_flight(user)


def deleted_in_flight(user: str) -> UserDeletedError:
    """What refuses a write whose user was deleted after it began."""
    return UserDeletedError(
        f"user {user!r} was deleted while this write was in flight; nothing was written "
        "(a new write starts the user afresh)"
    )
