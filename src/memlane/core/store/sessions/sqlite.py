"""Sessions in the SQLite store (docs/design/007-memory-model.md): creating, reading, updating and ending them, the
default TTL a session gives its blocks, and deleting a session with its blocks. :class:`SqliteSessions` is the
store's :class:`memlane.core.store.sessions.Sessions`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
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
from memlane.core.store.blocks.sqlite_rows import blocks_by_pk, delete_blocks, live_count
from memlane.core.store.sessions import NEW_SESSION_COLUMNS, NewSession, SessionChanges, refuse_taken, session_of
from memlane.core.store.sqlite.base import SqliteBase, json_text, json_value
from memlane.core.timefmt import to_epoch


def expiry(ingest_ts: float, ttl_s: int | None) -> float | None:
    """The expiry of a block written at ``ingest_ts`` with an effective TTL (None or 0: never)."""
    return None if not ttl_s else ingest_ts + ttl_s


def effective_ttl(block_ttl: int | None, session_ttl: int | None, default_ttl_s: int) -> int:
    """The block's own TTL, else its session's default, else the server's."""
    if block_ttl is not None:
        return block_ttl
    return session_ttl if session_ttl is not None else default_ttl_s


SESSION_COLUMNS = (
    "u.name, s.session_id, s.conversation_id, s.started_at, s.ended_at, s.annotations, s.metadata, "
    "s.default_ttl_s, s.created_at, " + live_count("b.user_id = s.user_id AND b.session_id = s.session_id")
)


def _session(row: Sequence[Any]) -> Session:
    """A Session from a row of :data:`SESSION_COLUMNS` (the user's name first, the live block count last)."""
    return session_of(str(row[0]), row[1:-1], int(row[-1]), lambda v: dict(json_value(v)))


def get_session(conn: sqlite3.Connection, user: str, session_id: str, now: float) -> Session:
    row = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions s JOIN users u ON u.id = s.user_id "
        "WHERE u.name = ? AND s.session_id = ?",
        (now, user, session_id),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    return _session(row)


def list_sessions(conn: sqlite3.Connection, user: str, limit: int, offset: int, now: float) -> Page[Session]:
    row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
    if row is None:
        return Page([], 0, limit, offset)
    user_id = int(row[0])
    total = int(conn.execute("SELECT count(*) FROM sessions WHERE user_id = ?", (user_id,)).fetchone()[0])
    rows = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.user_id = ? "
        "ORDER BY s.started_at DESC, s.session_id DESC LIMIT ? OFFSET ?",
        (now, user_id, limit, offset),
    ).fetchall()
    return Page([_session(r) for r in rows], total, limit, offset)


def insert_session(conn: sqlite3.Connection, user_id: int, new: NewSession, now: float) -> bool:
    """Create the session unless its id is taken; whether it was created."""
    cur = conn.execute(
        f"INSERT OR IGNORE INTO sessions(user_id, {NEW_SESSION_COLUMNS}, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (user_id, *new.values(json_text), now),
    )
    return cur.rowcount == 1


def session_state(conn: sqlite3.Connection, user_id: int, session_id: str) -> tuple[float | None, int | None] | None:
    """(ended at, default TTL) of the session, or None if there is none."""
    row = conn.execute(
        "SELECT ended_at, default_ttl_s FROM sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id)
    ).fetchone()
    if row is None:
        return None
    return (None if row[0] is None else float(row[0]), None if row[1] is None else int(row[1]))


def open_sessions(
    conn: sqlite3.Connection, user: str, user_id: int, blocks: Sequence[MemoryBlock], now: float
) -> dict[str, int | None]:
    """Inside an add's transaction: each of its blocks' sessions, created where missing (started at the
    earliest event time of its blocks in the add); SessionEndedError if one has ended. Returns each
    session's default TTL."""
    starts: dict[str, tuple[float, str]] = {}
    for b in blocks:
        t = to_epoch(b.event_time)
        if b.session_id not in starts or t < starts[b.session_id][0]:
            starts[b.session_id] = (t, starts.get(b.session_id, (t, b.conversation_id))[1])
    ttls: dict[str, int | None] = {}
    for sid, (start, conversation) in starts.items():
        state = session_state(conn, user_id, sid)
        if state is None:
            insert_session(conn, user_id, NewSession(sid, conversation, start), now)
            ttls[sid] = None
            continue
        if state[0] is not None:
            raise SessionEndedError(user, sid, f"session {sid!r} has ended: it takes no new blocks")
        ttls[sid] = state[1]
    return ttls


def require_open(conn: sqlite3.Connection, user: str, user_id: int, session_id: str) -> int | None:
    """The session's default TTL; SessionEndedError if it has ended (a block's session always exists)."""
    state = session_state(conn, user_id, session_id)
    if state is None:
        return None
    if state[0] is not None:
        raise SessionEndedError(user, session_id, f"session {session_id!r} has ended: its blocks cannot change")
    return state[1]


def _require_unended(conn: sqlite3.Connection, user: str, user_id: int, session_id: str, ended: str) -> None:
    """NotFoundError if the session does not exist, SessionEndedError (its message ``ended``) if it has ended."""
    state = session_state(conn, user_id, session_id)
    if state is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    if state[0] is not None:
        raise SessionEndedError(user, session_id, ended)


def update_session(conn: sqlite3.Connection, user: str, user_id: int, session_id: str, changes: SessionChanges) -> None:
    _require_unended(conn, user, user_id, session_id, f"session {session_id!r} has ended: it cannot be updated")
    sets = changes.columns(json_text)
    if sets:
        conn.execute(
            f"UPDATE sessions SET {', '.join(f'{c} = ?' for c in sets)} WHERE user_id = ? AND session_id = ?",
            (*sets.values(), user_id, session_id),
        )


def end_session(conn: sqlite3.Connection, user: str, user_id: int, session_id: str, at: float) -> None:
    _require_unended(conn, user, user_id, session_id, f"session {session_id!r} has already ended")
    conn.execute("UPDATE sessions SET ended_at = ? WHERE user_id = ? AND session_id = ?", (at, user_id, session_id))


class SqliteSessions(SqliteBase):
    """Sessions in a SQLite store."""

    def create_session(self, user: str, new: NewSession, *, exist_ok: bool = False, now: float) -> Session:
        with self._write() as conn:
            created = insert_session(conn, self._require_user_id(conn, user), new, now)
            refuse_taken(created, user, new, exist_ok)
            return get_session(conn, user, new.session_id, now)

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        found: Session = self._read_with(get_session, user, session_id, now)
        return found

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        page: Page[Session] = self._read_with(list_sessions, user, limit, offset, now)
        return page

    def update_session(self, user: str, session_id: str, changes: SessionChanges, *, now: float) -> Session:
        with self._write() as conn:
            update_session(conn, user, self._require_user_id(conn, user), session_id, changes)
            return get_session(conn, user, session_id, now)

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        with self._write() as conn:
            end_session(conn, user, self._require_user_id(conn, user), session_id, at)
            return get_session(conn, user, session_id, now)

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        with self._write() as conn:
            user_id = self._require_user_id(conn, user)
            if session_state(conn, user_id, session_id) is None:
                raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
            found = conn.execute("SELECT pk FROM blocks WHERE user_id = ? AND session_id = ?", (user_id, session_id))
            pks = [int(r[0]) for r in found]
            blocks = blocks_by_pk(conn, pks)
            delete_blocks(conn, user_id, pks)
            conn.execute("DELETE FROM sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id))
        if pks:
            self.cache_drop(user_id)
            self.checkpoint()
        return blocks
