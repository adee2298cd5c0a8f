"""Sessions in the PostgreSQL store (migration 7): creating, reading, updating and ending them, the default TTL a
session gives its blocks, and deleting a session with its blocks.

Every statement names one user's id (``sessions`` distributes by user, its key leads with ``user_id``). Writes
run inside the caller's transaction, which holds the user's row lock (the store's lock order: users, jobs,
blocks, keys). :class:`PostgresSessions` is the store's :class:`memlane.core.store.sessions.Sessions`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memlane.core.errors import (
    NotFoundError,
    SessionEndedError,
)
from memlane.core.model import (
    MemoryBlock,
    Page,
    Session,
)
from memlane.core.store.blocks.postgres_rows import ENSURE_SESSIONS, blocks_by_pk, delete_blocks, session_starts
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.sessions import NEW_SESSION_COLUMNS, NewSession, SessionChanges, refuse_taken, session_of
from memlane.core.store.users.postgres import json_object

_JSONB = frozenset({"annotations", "metadata"})
_SESSION_COLUMNS = (
    "s.session_id, s.conversation_id, s.started_at, s.ended_at, s.annotations, s.metadata, s.default_ttl_s, "
    "s.created_at"
)


def _jsonb(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value))


def _sessions(conn: Conn, user: str, user_id: int, rows: Sequence[tuple[Any, ...]], now: float) -> list[Session]:
    ids = [str(r[0]) for r in rows]
    counts: dict[str, int] = {}
    if ids:
        counts = {
            str(s): int(n)
            for s, n in conn.execute(
                "SELECT session_id, count(*) FROM blocks WHERE user_id = %s AND session_id = ANY(%s::text[]) "
                "AND (expires_ts IS NULL OR expires_ts > %s) GROUP BY session_id",
                (user_id, ids, now),
            ).fetchall()
        }
    return [session_of(user, r, counts.get(str(r[0]), 0), json_object) for r in rows]


def session_row(conn: Conn, user_id: int, session_id: str) -> tuple[Any, ...] | None:
    return conn.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.user_id = %s AND s.session_id = %s", (user_id, session_id)
    ).fetchone()


def get_session(conn: Conn, user: str, user_id: int | None, session_id: str, now: float) -> Session:
    row = None if user_id is None else session_row(conn, user_id, session_id)
    if user_id is None or row is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    return _sessions(conn, user, user_id, [row], now)[0]


def list_sessions(conn: Conn, user: str, user_id: int | None, limit: int, offset: int, now: float) -> Page[Session]:
    if user_id is None:
        return Page([], 0, limit, offset)
    total = conn.execute("SELECT count(*) FROM sessions WHERE user_id = %s", (user_id,)).fetchone()
    rows = conn.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions s WHERE s.user_id = %s "
        "ORDER BY s.started_at DESC, s.session_id DESC LIMIT %s OFFSET %s",
        (user_id, limit, offset),
    ).fetchall()
    return Page(_sessions(conn, user, user_id, rows, now), int(total[0]) if total else 0, limit, offset)


def create_session(conn: Conn, user: str, user_id: int, new: NewSession, *, exist_ok: bool, now: float) -> Session:
    row = conn.execute(
        f"INSERT INTO sessions(user_id, {NEW_SESSION_COLUMNS}, created_at) "
        "VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s) ON CONFLICT (user_id, session_id) DO NOTHING "
        "RETURNING session_id",
        (user_id, *new.values(_jsonb), now),
    ).fetchone()
    refuse_taken(row is not None, user, new, exist_ok)
    return get_session(conn, user, user_id, new.session_id, now)


def open_session(conn: Conn, user: str, user_id: int | None, session_id: str) -> tuple[Any, ...]:
    """The session's row for a write into it: NotFoundError if unknown, SessionEndedError if ended."""
    row = None if user_id is None else session_row(conn, user_id, session_id)
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    if row[3] is not None:
        raise SessionEndedError(user, session_id)
    return row


def update_session(
    conn: Conn, user: str, user_id: int | None, session_id: str, changes: SessionChanges, now: float
) -> Session:
    open_session(conn, user, user_id, session_id)
    sets = changes.columns(_jsonb)
    if sets:
        assign = ", ".join(f"{c} = %s::jsonb" if c in _JSONB else f"{c} = %s" for c in sets)
        conn.execute(
            f"UPDATE sessions SET {assign} WHERE user_id = %s AND session_id = %s",
            [*sets.values(), user_id, session_id],
        )
    return get_session(conn, user, user_id, session_id, now)


def end_session(conn: Conn, user: str, user_id: int | None, session_id: str, at: float, now: float) -> Session:
    row = None if user_id is None else session_row(conn, user_id, session_id)
    if user_id is None or row is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    if row[3] is not None:
        raise SessionEndedError(user, session_id, f"session {session_id!r} has already ended")
    conn.execute("UPDATE sessions SET ended_at = %s WHERE user_id = %s AND session_id = %s", (at, user_id, session_id))
    return get_session(conn, user, user_id, session_id, now)


def ensure_sessions(
    conn: Conn, user: str, user_id: int, blocks: Sequence[MemoryBlock], now: float
) -> dict[str, int | None]:
    """Create the sessions of these blocks that are missing (started at the earliest event time of their
    blocks, in the conversation of the first), and return every one's default TTL; SessionEndedError if
    one has ended (the caller's transaction then writes nothing)."""
    ids, conversations, starts = session_starts(blocks)
    if not ids:
        return {}
    conn.execute(
        ENSURE_SESSIONS,
        {"user_id": user_id, "now": now, "sessions": ids, "conversations": conversations, "starts": starts},
    )
    rows = conn.execute(
        "SELECT session_id, ended_at, default_ttl_s FROM sessions WHERE user_id = %s AND session_id = ANY(%s::text[])",
        (user_id, ids),
    ).fetchall()
    for sid, ended, _ in rows:
        if ended is not None:
            raise SessionEndedError(user, str(sid))
    return {str(sid): None if ttl is None else int(ttl) for sid, _, ttl in rows}


def expiry(ingest: float, ttl_s: int | None, session_ttl_s: int | None, default_ttl_s: int) -> float | None:
    """When a block written at ``ingest`` expires: its own TTL, else its session's, else the default; 0
    (or nothing) is never."""
    ttl = ttl_s if ttl_s is not None else session_ttl_s if session_ttl_s is not None else default_ttl_s
    return None if not ttl else ingest + ttl


class PostgresSessions(PostgresBase):
    """Sessions in a PostgreSQL store."""

    def create_session(self, user: str, new: NewSession, *, exist_ok: bool = False, now: float) -> Session:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            return create_session(conn, user, user_id, new, exist_ok=exist_ok, now=now)

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        with self.transaction() as conn:
            return get_session(conn, user, self._user_row(conn, user), session_id, now)

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        with self.transaction() as conn:
            return list_sessions(conn, user, self._user_row(conn, user), limit, offset, now)

    def update_session(self, user: str, session_id: str, changes: SessionChanges, *, now: float) -> Session:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            return update_session(conn, user, user_id, session_id, changes, now)

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            return end_session(conn, user, user_id, session_id, at, now)

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        """The session and its blocks (expired ones too), deleted as completely as by delete_block, in one
        transaction; the blocks as they were."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None or session_row(conn, user_id, session_id) is None:
                raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = %s AND session_id = %s", (user_id, session_id)
                ).fetchall()
            ]
            blocks = blocks_by_pk(conn, user_id, pks)
            delete_blocks(conn, user_id, pks)
            conn.execute("DELETE FROM sessions WHERE user_id = %s AND session_id = %s", (user_id, session_id))
        return blocks
