"""API keys: random secrets, kept in the store as SHA-256 hashes, each bound to one user.

A key reads ``mlk_<key id>_<secret>``. The key id (public, 12 hex digits) finds the row; the secret's hash
is compared in constant time, so neither a lookup nor a comparison depends on how much of a guess is right.
SHA-256 without a salt or stretching is enough here: the secrets are 256 random bits, not passwords.

The keys live in the store beside the users (``api_keys``, by user id): a key is only made for a user that
exists, ``delete_user`` removes the user's keys in its own transaction (whatever deletes the user: the
HTTP service, ``memlane delete-user``, :meth:`Memory.delete_user <memlane.core.memory.Memory.delete_user>`),
and every process on the store sees the same keys. The HTTP service and the MCP server both check keys here.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from memlane.core.errors import NotFoundError, StoreError, ValidationError
from memlane.core.model import KeyRecord
from memlane.core.names import check_label, check_stored_name
from memlane.core.store.apikeys import ApiKeys as StoredKeys

__all__ = [
    "KEY_PREFIX",
    "ROLES",
    "ROLE_ADMIN",
    "ROLE_READ_ONLY",
    "ROLE_READ_WRITE",
    "ApiKeys",
    "KeyRecord",
    "NewKey",
    "VerifiedKey",
    "check_role",
    "same_secret",
    "secret_hash",
]

KEY_PREFIX = "mlk"
# What a key may do on its user's memory: read (searches are reads); also write; also write what all users
# share (the prompt registry). No role reaches another user's memory: only the admin key does.
ROLE_READ_ONLY = "read-only"
ROLE_READ_WRITE = "read-write"
ROLE_ADMIN = "admin"
ROLES = (ROLE_READ_ONLY, ROLE_READ_WRITE, ROLE_ADMIN)
# Compared against when a key id is unknown, so that path costs the same as a wrong secret.
_DUMMY_HASH = hashlib.sha256(b"memlane-no-such-key").hexdigest()


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: ``key`` is the full secret, shown once."""

    key: str
    record: KeyRecord


@dataclass(frozen=True, slots=True)
class VerifiedKey:
    """A valid key's record, and the store's deletion epoch read with it: an add authorised by this key
    passes it on (``Memory.add(..., epoch=...)``), so that if the key's user is deleted before the add
    writes, the add is refused instead of recreating the user."""

    record: KeyRecord
    epoch: int

    @property
    def user(self) -> str:
        return self.record.user


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def check_role(role: str, where: str = "role") -> str:
    """``role`` if it is one of :data:`ROLES`, else a ValidationError naming ``where``."""
    if role not in ROLES:
        raise ValidationError(f"must be one of {', '.join(ROLES)}, not {role!r}", where=where)
    return role


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets (through their hashes, so lengths do not leak either)."""
    return hmac.compare_digest(secret_hash(given), secret_hash(expected))


class ApiKeys:
    """The API keys of the users of ``store``."""

    def __init__(self, store: StoredKeys) -> None:
        self.store = store

    def create(self, user: str, label: str = "", role: str = ROLE_READ_WRITE) -> NewKey:
        """A new key for ``user`` (NotFoundError if there is no such user) with ``role`` (one of
        :data:`ROLES`); the caller shows ``key`` once, only its hash is kept. ``user`` may be a name stored
        before the name rule (:func:`memlane.core.names.check_stored_name`): a key is how such a user is
        reached over HTTP."""
        check_stored_name(user, "user")
        check_label(label, "label")
        check_role(role)
        while True:
            key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
            record = KeyRecord(key_id=key_id, user=user, label=label, created_at=time.time(), role=role)
            if self.store.add_api_key(record, secret_hash(secret)):
                return NewKey(key=f"{KEY_PREFIX}_{key_id}_{secret}", record=record)

    def verify(self, key: str) -> VerifiedKey | None:
        """The record of a valid key (with the deletion epoch read with it), or None."""
        prefix, _, rest = key.partition("_")
        key_id, _, secret = rest.partition("_")
        stored = self.store.get_api_key(key_id) if key_id else None
        ok = hmac.compare_digest(secret_hash(secret), stored.secret_sha256 if stored else _DUMMY_HASH)
        if not (ok and stored is not None and prefix == KEY_PREFIX):
            return None
        return VerifiedKey(record=stored.record, epoch=stored.epoch)

    def list(self, user: str) -> builtins.list[KeyRecord]:
        return self.store.list_api_keys(check_stored_name(user, "user"))

    def revoke(self, user: str, key_id: str) -> bool:
        """Delete one of ``user``'s keys; False if it is not theirs or does not exist."""
        return self.store.revoke_api_key(check_stored_name(user, "user"), key_id)

    def import_file(self, path: Path) -> tuple[int, int]:
        """Copy the keys of an earlier memlane's key file (a SQLite file with an ``http_api_keys`` table,
        what ``memlane serve --keys`` used to keep) into the store. Returns (imported, skipped): keys of
        users the store does not have, and key ids it already holds, are skipped."""
        imported = skipped = 0
        for key_id, user, digest, label, created_at in _old_keys(path):
            try:
                added = self.store.add_api_key(
                    KeyRecord(key_id=key_id, user=user, label=label, created_at=created_at), digest
                )
            except NotFoundError:
                added = False
            imported, skipped = imported + added, skipped + (not added)
        return imported, skipped


def _old_keys(path: Path) -> Iterator[tuple[str, str, str, str, float]]:
    if not path.is_file():
        raise NotFoundError(f"no key file at {path}")
    try:
        with closing(sqlite3.connect(path)) as db:
            rows = db.execute("SELECT key_id, user, secret_sha256, label, created_at FROM http_api_keys").fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the keys in {path}: {exc}") from exc
    for r in rows:
        yield str(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4])
