"""Users' display names and metadata, and first-class sessions, in the PostgreSQL store (migration 7).

Every statement names one user's id (``sessions`` distributes by user, its key leads with ``user_id``);
counts over a user's blocks are separate uncorrelated statements, never subqueries correlated with the
shared ``users`` table (which a distributed PostgreSQL cannot plan: docs/scaling.md). Writes run inside the
caller's transaction, which holds the user's row lock (the store's lock order: users, jobs, blocks, keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memlane.core.errors import AlreadyExistsError, NotFoundError, SessionEndedError
from memlane.core.model import MemoryBlock, Page, Session, UserInfo
from memlane.core.store.like import contains_pattern
from memlane.core.store.postgres.keys import Conn
from memlane.core.store.postgres.tenant import user_key
from memlane.core.timefmt import from_epoch

_SESSION_COLUMNS = (
    "s.session_id, s.conversation_id, s.started_at, s.ended_at, s.annotations, s.metadata, s.default_ttl_s, "
    "s.created_at"
)


def _obj(value: Any) -> dict[str, Any]:
    return dict(json.loads(value) if isinstance(value, str | bytes) else value or {})


# -- users -------------------------------------------------------------------------------------------------


def user_infos(conn: Conn, rows: Sequence[tuple[Any, ...]], now: float) -> list[UserInfo]:
    """Users from rows of (id, name, created_at, display_name, metadata), with their live block count,
    session count and last activity (the ingest time of their newest block): one grouped statement per
    table for all of them, keyed by the users' ids."""
    ids = [int(r[0]) for r in rows]
    blocks: dict[int, tuple[int, float | None]] = {}
    sessions: dict[int, int] = {}
    if ids:
        blocks = {
            int(u): (int(n), None if last is None else float(last))
            for u, n, last in conn.execute(
                "SELECT user_id, count(*) FILTER (WHERE expires_ts IS NULL OR expires_ts > %s), max(ingest_ts) "
                "FROM blocks WHERE user_id = ANY(%s::bigint[]) GROUP BY user_id",
                (now, ids),
            ).fetchall()
        }
        sessions = {
            int(u): int(n)
            for u, n in conn.execute(
                "SELECT user_id, count(*) FROM sessions WHERE user_id = ANY(%s::bigint[]) GROUP BY user_id", (ids,)
            ).fetchall()
        }
    out = []
    for uid, name, created, display, metadata in rows:
        n, last = blocks.get(int(uid), (0, None))
        out.append(
            UserInfo(
                name=str(name),
                blocks=n,
                created_at=from_epoch(float(created)),
                display_name=None if display is None else str(display),
                metadata=_obj(metadata),
                sessions=sessions.get(int(uid), 0),
                last_activity=None if last is None else from_epoch(last),
            )
        )
    return out


_USER_ROW = "SELECT id, name, created_at, display_name, metadata FROM users"


def get_user(conn: Conn, user: str, now: float) -> UserInfo:
    rows = conn.execute(f"{_USER_ROW} WHERE id = %s AND name = %s", (user_key(user), user)).fetchall()
    if not rows:
        raise NotFoundError(f"user {user!r} not found")
    return user_infos(conn, rows, now)[0]


def update_user(conn: Conn, user_id: int, *, display_name: str | None, metadata: Mapping[str, Any] | None) -> None:
    if display_name is not None:
        conn.execute(
            "UPDATE users SET display_name = %s WHERE id = %s", (display_name if display_name != "" else None, user_id)
        )
    if metadata is not None:
        conn.execute("UPDATE users SET metadata = %s::jsonb WHERE id = %s", (json.dumps(dict(metadata)), user_id))


def find_users(
    conn: Conn,
    *,
    name: str | None,
    metadata: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    now: float,
    contains: str | None = None,
    metadata_text: Mapping[str, str] | None = None,
) -> Page[UserInfo]:
    where: list[str] = ["true"]
    params: list[object] = []
    if name is not None:
        where.append("display_name = %s")
        params.append(name)
    if contains:
        # ILIKE folds case as the database's locale does; the text's own % and _ are escaped.
        where.append("(name ILIKE %s ESCAPE '\\' OR display_name ILIKE %s ESCAPE '\\')")
        params += [contains_pattern(contains)] * 2
    for key, value in (metadata or {}).items():
        # a JSON value compared as JSON (equal, not contained): "1" and 1 differ, [1] is not [1, 2]
        where.append("metadata -> %s = %s::jsonb")
        params += [key, json.dumps(value)]
    for key, text in (metadata_text or {}).items():
        # read as text: a string as itself, a number or a boolean as its JSON text; never a list, an object or null
        where.append("jsonb_typeof(metadata -> %s) IN ('string', 'number', 'boolean') AND metadata ->> %s = %s")
        params += [key, key, text]
    clause = " AND ".join(where)
    total = conn.execute(f"SELECT count(*) FROM users WHERE {clause}", params).fetchone()
    rows = conn.execute(
        f"{_USER_ROW} WHERE {clause} ORDER BY name LIMIT %s OFFSET %s", [*params, limit, offset]
    ).fetchall()
    return Page(user_infos(conn, rows, now), int(total[0]) if total else 0, limit, offset)


# -- sessions ----------------------------------------------------------------------------------------------


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
    return [
        Session(
            user=user,
            session_id=str(sid),
            conversation_id=str(conv),
            started_at=from_epoch(float(started)),
            ended_at=None if ended is None else from_epoch(float(ended)),
            annotations={str(k): str(v) for k, v in _obj(annotations).items()},
            metadata=_obj(metadata),
            default_ttl_s=None if ttl is None else int(ttl),
            created_at=from_epoch(float(created)),
            blocks=counts.get(str(sid), 0),
        )
        for sid, conv, started, ended, annotations, metadata, ttl, created in rows
    ]


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


def create_session(
    conn: Conn,
    user: str,
    user_id: int,
    session_id: str,
    *,
    conversation_id: str,
    started_at: float,
    annotations: Mapping[str, str],
    metadata: Mapping[str, Any],
    default_ttl_s: int | None,
    exist_ok: bool,
    now: float,
) -> Session:
    row = conn.execute(
        "INSERT INTO sessions(user_id, conversation_id, session_id, started_at, annotations, metadata, "
        "default_ttl_s, created_at) VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s) "
        "ON CONFLICT (user_id, session_id) DO NOTHING RETURNING session_id",
        (
            user_id,
            conversation_id,
            session_id,
            started_at,
            json.dumps(dict(annotations)),
            json.dumps(dict(metadata)),
            default_ttl_s,
            now,
        ),
    ).fetchone()
    if row is None and not exist_ok:
        raise AlreadyExistsError("session", session_id, f"session {session_id!r} already exists for user {user!r}")
    return get_session(conn, user, user_id, session_id, now)


def open_session(conn: Conn, user: str, user_id: int | None, session_id: str) -> tuple[Any, ...]:
    """The session's row for a write into it: NotFoundError if unknown, SessionEndedError if ended."""
    row = None if user_id is None else session_row(conn, user_id, session_id)
    if row is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    if row[3] is not None:
        raise SessionEndedError(user, session_id)
    return row


def update_session(
    conn: Conn,
    user: str,
    user_id: int | None,
    session_id: str,
    *,
    annotations: Mapping[str, str] | None,
    metadata: Mapping[str, Any] | None,
    default_ttl_s: int | None,
    now: float,
) -> Session:
    open_session(conn, user, user_id, session_id)
    sets: list[str] = []
    params: list[object] = []
    if annotations is not None:
        sets.append("annotations = %s::jsonb")
        params.append(json.dumps(dict(annotations)))
    if metadata is not None:
        sets.append("metadata = %s::jsonb")
        params.append(json.dumps(dict(metadata)))
    if default_ttl_s is not None:
        sets.append("default_ttl_s = %s")
        params.append(default_ttl_s)
    if sets:
        conn.execute(
            f"UPDATE sessions SET {', '.join(sets)} WHERE user_id = %s AND session_id = %s",
            [*params, user_id, session_id],
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


ENSURE_SESSIONS = (
    "INSERT INTO sessions(user_id, conversation_id, session_id, started_at, created_at) "
    "SELECT %(user_id)s, c, s, t, %(now)s "
    "FROM unnest(%(sessions)s::text[], %(conversations)s::text[], %(starts)s::float8[]) AS x(s, c, t) "
    "ON CONFLICT (user_id, session_id) DO NOTHING"
)


def session_starts(blocks: Sequence[MemoryBlock]) -> tuple[list[str], list[str], list[float]]:
    """The sessions of these blocks, sorted (two adds making the same sessions take their locks in one
    order), each with the conversation of its first block and the earliest event time of its blocks."""
    first: dict[str, tuple[str, float]] = {}
    for b in blocks:
        ts = b.event_time.timestamp()
        conv, start = first.get(b.session_id, (b.conversation_id, ts))
        first[b.session_id] = (conv, min(start, ts))
    ids = sorted(first)
    return ids, [first[s][0] for s in ids], [first[s][1] for s in ids]


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
