"""API keys: random secrets stored as SHA-256 hashes, each scoped to one user.

A key reads ``mlk_<key id>_<secret>``. The key id (public, 12 hex digits) finds the row; the secret's hash
is compared in constant time, so neither a lookup nor a comparison depends on how much of a guess is right.
SHA-256 without a salt or stretching is enough here: the secrets are 256 random bits, not passwords.

The keys live in the store's own SQLite file, in a table of the interface layer (``http_api_keys``) created
with ``CREATE TABLE IF NOT EXISTS``: the core's numbered migrations (``PRAGMA user_version``) are left alone.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.core.errors import StoreError

KEY_PREFIX = "mlk"
BUSY_TIMEOUT_MS = 30_000
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS http_api_keys(
        key_id TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        secret_sha256 TEXT NOT NULL,
        label TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS http_api_keys_user ON http_api_keys(user)",
)
# Compared against when a key id is unknown, so that path costs the same as a wrong secret.
_DUMMY_HASH = hashlib.sha256(b"memlane-no-such-key").hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A stored key, without its secret."""

    key_id: str
    user: str
    label: str
    created_at: float


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: ``key`` is the full secret, shown once."""

    key: str
    record: KeyRecord


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets (through their hashes, so lengths do not leak either)."""
    return hmac.compare_digest(secret_hash(given), secret_hash(expected))


class KeyStore:
    """The ``http_api_keys`` table in the SQLite file at ``path`` (``":memory:"`` for a private one).

    One connection shared by threads behind a lock: each statement is a single indexed row or two.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if str(path) != ":memory:":
                self._db.execute("PRAGMA journal_mode = WAL")
            # A revoked key's hash is overwritten on disk, like the core's deleted rows.
            self._db.execute("PRAGMA secure_delete = ON")
            for sql in SCHEMA:
                self._db.execute(sql)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the key table in {path}: {exc}") from exc

    def create(self, user: str, label: str = "") -> NewKey:
        """A new key for ``user``; the caller shows ``key`` once, only its hash is kept."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        record = KeyRecord(key_id=key_id, user=user, label=label, created_at=time.time())
        self._run(
            "INSERT INTO http_api_keys(key_id, user, secret_sha256, label, created_at) VALUES (?, ?, ?, ?, ?)",
            (key_id, user, secret_hash(secret), label, record.created_at),
        )
        return NewKey(key=f"{KEY_PREFIX}_{key_id}_{secret}", record=record)

    def verify(self, key: str) -> KeyRecord | None:
        """The record of a valid key, or None."""
        prefix, _, rest = key.partition("_")
        key_id, _, secret = rest.partition("_")
        rows = self._run(
            "SELECT key_id, user, label, created_at, secret_sha256 FROM http_api_keys WHERE key_id = ?", (key_id,)
        )
        stored = str(rows[0][4]) if rows else _DUMMY_HASH
        ok = hmac.compare_digest(secret_hash(secret), stored)
        if not (ok and rows and prefix == KEY_PREFIX):
            return None
        r = rows[0]
        return KeyRecord(key_id=str(r[0]), user=str(r[1]), label=str(r[2]), created_at=float(r[3]))

    def list(self, user: str) -> builtins.list[KeyRecord]:
        rows = self._run(
            "SELECT key_id, user, label, created_at FROM http_api_keys WHERE user = ? ORDER BY created_at", (user,)
        )
        return [KeyRecord(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]

    def revoke(self, user: str, key_id: str) -> bool:
        """Delete one of ``user``'s keys; False if it is not theirs or does not exist."""
        return self._count("DELETE FROM http_api_keys WHERE user = ? AND key_id = ?", (user, key_id)) == 1

    def delete_user(self, user: str) -> int:
        """Delete every key of ``user``; returns how many."""
        return self._count("DELETE FROM http_api_keys WHERE user = ?", (user,))

    def count(self, user: str) -> int:
        return int(self._run("SELECT count(*) FROM http_api_keys WHERE user = ?", (user,))[0][0])

    def users(self) -> set[str]:
        """Every user that holds a key."""
        return {str(r[0]) for r in self._run("SELECT DISTINCT user FROM http_api_keys")}

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _run(self, sql: str, params: tuple[object, ...] = ()) -> builtins.list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"key table in {self.path}: {exc}") from exc

    def _count(self, sql: str, params: tuple[object, ...]) -> int:
        with self._lock:
            try:
                return int(self._db.execute(sql, params).rowcount)
            except sqlite3.Error as exc:
                raise StoreError(f"key table in {self.path}: {exc}") from exc
