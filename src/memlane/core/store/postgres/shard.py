"""One shard of a sharded PostgreSQL store: a :class:`PostgresStore` that knows its place among the shards
and refuses writes for a user it no longer (or not yet alone) holds.

Each shard's database gets two small tables besides memlane's own (created when the shard is opened):

- ``shard_map(name, shard)``: kept by a user's *home* shard (the one their name hashes to, :func:`home_shard`)
  for users that live elsewhere, because they were moved. No row: the user lives on their home shard.
- ``shard_moves(name, state, shard)``: kept by the shard a user is leaving. ``moving``: the user's rows here
  are being copied to ``shard`` and take no writes; ``moved``: the user left for ``shard`` (a stale router
  is sent there).

Every write of a user takes the user's row lock first (the store's lock order); the check of
``shard_moves`` comes right after it, so a write either commits before a move freezes the user (and is
copied) or is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from memlane.core.errors import ConfigError, StoreError
from memlane.core.store.postgres import accounts
from memlane.core.store.postgres.keys import Conn
from memlane.core.store.postgres.sessions import update_user
from memlane.core.store.postgres.store import PostgresStore

MOVING, MOVED = "moving", "moved"
# The users a shard is moving away or has moved (their rows here are frozen, their jobs fenced).
FROZEN_USERS = "SELECT u.id FROM users u JOIN shard_moves m ON m.name = u.name"

SHARD_TABLES = """
CREATE TABLE IF NOT EXISTS shard_map(
    name text PRIMARY KEY,
    shard integer NOT NULL,
    moved_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS shard_moves(
    name text PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('moving', 'moved')),
    shard integer NOT NULL,
    at double precision NOT NULL
);
"""


def home_shard(user: str, count: int) -> int:
    """The shard a user's name hashes to: the first 8 bytes of the SHA-256 of the UTF-8 name, as a
    big-endian unsigned integer, modulo the number of shards. Stable across processes, machines and
    Python versions (unlike ``hash()``)."""
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


class UserMovingError(StoreError):
    """A write reached a shard that is moving the user away (``state`` "moving") or that the user has left
    (``state`` "moved"); ``shard`` is where the user goes."""

    def __init__(self, user: str, state: str, shard: int) -> None:
        self.user, self.state, self.shard = user, state, shard
        doing = "is being moved to another shard" if state == MOVING else "was moved to another shard"
        super().__init__(
            f"user {user!r} {doing} (shard {shard}); nothing was written, retry in a few seconds",
            reason="user being moved between shards",
        )


def check_not_moving(conn: Conn, user: str) -> None:
    """Inside a write's transaction, after the user's row lock: UserMovingError if this shard is moving
    the user away or the user left."""
    row = conn.execute("SELECT state, shard FROM shard_moves WHERE name = %s", (user,)).fetchone()
    if row is not None:
        raise UserMovingError(user, str(row[0]), int(row[1]))


class ShardStore(PostgresStore):
    """Shard ``index`` of ``count``: the PostgreSQL store with the move check on every write path."""

    def __init__(self, url: str, *, index: int, count: int, accept_counts: tuple[int, ...] = (), **kw: Any) -> None:
        """``accept_counts``: other shard counts to accept in the database's record (only while a store grows)."""
        super().__init__(url, **kw)
        self.index, self.count, self.accept_counts = index, count, accept_counts
        try:
            self._claim_place()
        except BaseException:
            self.close()
            raise

    def _claim_place(self) -> None:
        """Create the shard tables and record (first time) or check this database's place among the shards:
        a list given in another order, or with servers added or removed, would send users to the wrong
        database, so it is refused."""
        place = {"index": self.index, "count": self.count}
        with self.transaction() as conn:
            conn.execute(SHARD_TABLES.encode())
            unplaced = conn.execute("SELECT 1 FROM meta WHERE key = 'shard'").fetchone() is None
            if unplaced and self.count > 1 and conn.execute("SELECT 1 FROM users LIMIT 1").fetchone() is not None:
                raise ConfigError(
                    f"the database {self._where} holds the users of a store that was not sharded; listed as one of "
                    f"{self.count} shards, some of its users would be looked for elsewhere (docs/scaling.md: "
                    "adding a shard)"
                )
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('shard', %s) ON CONFLICT DO NOTHING", (json.dumps(place),)
            )
            row = conn.execute("SELECT value FROM meta WHERE key = 'shard'").fetchone()
        assert row is not None
        recorded = json.loads(str(row[0]))
        self.recorded_count = int(recorded["count"])
        if recorded["index"] != self.index or (
            recorded["count"] != self.count and recorded["count"] not in self.accept_counts
        ):
            raise ConfigError(
                f"the database {self._where} is shard {recorded['index']} of {recorded['count']}, but the store URL "
                f"lists it as shard {self.index} of {self.count}; list the shards in their original order "
                "(docs/scaling.md: adding a shard)"
            )

    def record_count(self, count: int) -> None:
        """Record that the store now has ``count`` shards (the last step of growing it)."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE meta SET value = %s WHERE key = 'shard'", (json.dumps({"index": self.index, "count": count}),)
            )
        self.recorded_count = count

    @staticmethod
    def _lock_user(conn: Conn, user: str, *, create: bool) -> int | None:
        user_id = PostgresStore._lock_user(conn, user, create=create)
        check_not_moving(conn, user)
        return user_id

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        with self.transaction() as conn:
            existed = self._lock_user(conn, user, create=False) is not None
            if not existed:
                user_id = self._lock_user(conn, user, create=True)
                assert user_id is not None
                update_user(conn, user_id, display_name=display_name or None, metadata=metadata)
        return not existed

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        with self.transaction() as conn:
            self._lock_user(conn, user, create=False)
            return accounts.add_key(conn, user, key_id, secret_sha256, label, created_at, role)

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        with self.transaction() as conn:
            self._lock_user(conn, user, create=False)
            return accounts.revoke_key(conn, user, key_id)

    def mapped_shard(self, user: str) -> int | None:
        """Where this (home) shard's map says the user lives, if they were moved away from it."""
        rows = self.query("SELECT shard FROM shard_map WHERE name = %s", (user,))
        return int(rows[0][0]) if rows else None

    def move_state(self, user: str) -> tuple[str, int] | None:
        rows = self.query("SELECT state, shard FROM shard_moves WHERE name = %s", (user,))
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def has_user(self, user: str) -> bool:
        return bool(self.query("SELECT 1 FROM users WHERE name = %s", (user,)))
