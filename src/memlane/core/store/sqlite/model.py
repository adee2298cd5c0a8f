"""The memory model in the SQLite store (docs/design/007-memory-model.md): users' names and metadata,
sessions, TTLs, filters and the prompt registry, each a few statements inside the caller's transaction.

Expiry is decided against the caller's clock: a block is live while ``expires_ts`` is NULL or after
``now``. Every read of blocks carries :data:`LIVE` (or its pk list of expired blocks, for the in-memory
indexes), so a block is gone from every read the moment it expires, before any sweep deletes it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from memlane.core.errors import AlreadyExistsError, ConflictError, NotFoundError, PromptArchivedError, SessionEndedError
from memlane.core.model import Filters, MemoryBlock, Page, Prompt, PromptVersion, Session, UserInfo
from memlane.core.store.like import contains_pattern
from memlane.core.store.vectors import BlockSet
from memlane.core.timefmt import from_epoch, to_epoch

# A block of alias ``b`` that has not expired at the parameter's time.
LIVE = "(b.expires_ts IS NULL OR b.expires_ts > ?)"
# How many filters' kept blocks the store remembers (FilterCache).
FILTER_CACHE_ENTRIES = 32


def live_count(where: str) -> str:
    """SQL counting the live blocks (alias ``b``) that ``where`` keeps: all of them, counted on an index,
    less the expired ones, counted on the partial expiry index (a count that read every block's expiry
    would scan a large user's rows). It takes ``where``'s parameters twice, then one more: now."""
    return (
        f"((SELECT count(*) FROM blocks b WHERE {where}) - "
        f"(SELECT count(*) FROM blocks b WHERE {where} AND b.expires_ts IS NOT NULL AND b.expires_ts <= ?))"
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), sort_keys=True, ensure_ascii=False)


def expiry(ingest_ts: float, ttl_s: int | None) -> float | None:
    """The expiry of a block written at ``ingest_ts`` with an effective TTL (None or 0: never)."""
    return None if not ttl_s else ingest_ts + ttl_s


def effective_ttl(block_ttl: int | None, session_ttl: int | None, default_ttl_s: int) -> int:
    """The block's own TTL, else its session's default, else the server's."""
    if block_ttl is not None:
        return block_ttl
    return session_ttl if session_ttl is not None else default_ttl_s


# -- users -----------------------------------------------------------------------------------------------

USER_COLUMNS = (
    "u.name, u.created_at, u.display_name, u.metadata, " + live_count("b.user_id = u.id") + ", "
    "(SELECT count(*) FROM sessions s WHERE s.user_id = u.id), "
    "(SELECT max(b.ingest_ts) FROM blocks b WHERE b.user_id = u.id AND " + LIVE + ")"
)


def user_info(row: Sequence[Any]) -> UserInfo:
    name, created, display, metadata, blocks, sessions, last = row
    return UserInfo(
        name=str(name),
        blocks=int(blocks),
        created_at=from_epoch(float(created)),
        display_name=None if display is None else str(display),
        metadata=dict(_json(metadata)),
        sessions=int(sessions),
        last_activity=None if last is None else from_epoch(float(last)),
    )


def get_user(conn: sqlite3.Connection, user: str, now: float) -> UserInfo:
    row = conn.execute(f"SELECT {USER_COLUMNS} FROM users u WHERE u.name = ?", (now, now, user)).fetchone()
    if row is None:
        raise NotFoundError(f"user {user!r} not found")
    return user_info(row)


def set_user_fields(
    conn: sqlite3.Connection, user_id: int, display_name: str | None, metadata: Mapping[str, Any] | None
) -> None:
    if display_name is not None:
        conn.execute("UPDATE users SET display_name = ? WHERE id = ?", (display_name or None, user_id))
    if metadata is not None:
        conn.execute("UPDATE users SET metadata = ? WHERE id = ?", (_dumps(metadata), user_id))


def find_users(
    conn: sqlite3.Connection,
    *,
    name: str | None,
    metadata: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    now: float,
    contains: str | None = None,
    metadata_text: Mapping[str, str] | None = None,
) -> Page[UserInfo]:
    where = ["1 = 1"]
    params: list[object] = []
    if name is not None:
        where.append("u.display_name = ?")
        params.append(name)
    if contains:
        # SQLite's LIKE ignores the case of ASCII letters; the text's own % and _ are escaped to match themselves.
        where.append("(u.name LIKE ? ESCAPE '\\' OR u.display_name LIKE ? ESCAPE '\\')")
        params += [contains_pattern(contains)] * 2
    for key, value in (metadata or {}).items():
        # A JSON value compared as JSON: "1" (a string) and 1 (a number) are different values.
        where.append("(u.metadata -> ?) = ?")
        params += [json_path(key), json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    for key, text in (metadata_text or {}).items():
        # Read as text: a string as itself, a number or a boolean as its JSON text; never a list, an object
        # or null.
        where.append(
            "CASE json_type(u.metadata, ?) WHEN 'text' THEN u.metadata ->> ? "
            "WHEN 'array' THEN NULL WHEN 'object' THEN NULL WHEN 'null' THEN NULL ELSE u.metadata -> ? END = ?"
        )
        params += [json_path(key)] * 3 + [text]
    clause = " AND ".join(where)
    total = int(conn.execute(f"SELECT count(*) FROM users u WHERE {clause}", params).fetchone()[0])
    rows = conn.execute(
        f"SELECT {USER_COLUMNS} FROM users u WHERE {clause} ORDER BY u.name LIMIT ? OFFSET ?",
        [now, now, *params, limit, offset],
    ).fetchall()
    return Page([user_info(r) for r in rows], total, limit, offset)


def json_path(key: str) -> str:
    """The JSON path of a top-level key, quoted (keys are free text in metadata)."""
    return "$." + json.dumps(key)


# -- sessions --------------------------------------------------------------------------------------------

SESSION_COLUMNS = (
    "u.name, s.session_id, s.conversation_id, s.started_at, s.ended_at, s.annotations, s.metadata, "
    "s.default_ttl_s, s.created_at, " + live_count("b.user_id = s.user_id AND b.session_id = s.session_id")
)


def _session(row: Sequence[Any]) -> Session:
    user, sid, conv, started, ended, annotations, metadata, ttl, created, blocks = row
    return Session(
        user=str(user),
        session_id=str(sid),
        conversation_id=str(conv),
        started_at=from_epoch(float(started)),
        ended_at=None if ended is None else from_epoch(float(ended)),
        annotations={str(k): str(v) for k, v in dict(_json(annotations)).items()},
        metadata=dict(_json(metadata)),
        default_ttl_s=None if ttl is None else int(ttl),
        created_at=from_epoch(float(created)),
        blocks=int(blocks),
    )


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


def insert_session(
    conn: sqlite3.Connection,
    user_id: int,
    session_id: str,
    *,
    conversation_id: str,
    started_at: float,
    annotations: Mapping[str, str],
    metadata: Mapping[str, Any],
    default_ttl_s: int | None,
    now: float,
) -> bool:
    """Create the session unless its id is taken; whether it was created."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO sessions(user_id, session_id, conversation_id, started_at, annotations, metadata, "
        "default_ttl_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            user_id,
            session_id,
            conversation_id,
            started_at,
            _dumps(annotations),
            _dumps(metadata),
            default_ttl_s,
            now,
        ),
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
            insert_session(
                conn,
                user_id,
                sid,
                conversation_id=conversation,
                started_at=start,
                annotations={},
                metadata={},
                default_ttl_s=None,
                now=now,
            )
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


def update_session(
    conn: sqlite3.Connection,
    user: str,
    user_id: int,
    session_id: str,
    *,
    annotations: Mapping[str, str] | None,
    metadata: Mapping[str, Any] | None,
    default_ttl_s: int | None,
) -> None:
    state = session_state(conn, user_id, session_id)
    if state is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    if state[0] is not None:
        raise SessionEndedError(user, session_id, f"session {session_id!r} has ended: it cannot be updated")
    sets: list[str] = []
    params: list[object] = []
    if annotations is not None:
        sets.append("annotations = ?")
        params.append(_dumps(annotations))
    if metadata is not None:
        sets.append("metadata = ?")
        params.append(_dumps(metadata))
    if default_ttl_s is not None:
        sets.append("default_ttl_s = ?")
        params.append(default_ttl_s)
    if sets:
        conn.execute(
            f"UPDATE sessions SET {', '.join(sets)} WHERE user_id = ? AND session_id = ?",
            (*params, user_id, session_id),
        )


def end_session(conn: sqlite3.Connection, user: str, user_id: int, session_id: str, at: float) -> None:
    state = session_state(conn, user_id, session_id)
    if state is None:
        raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
    if state[0] is not None:
        raise SessionEndedError(user, session_id, f"session {session_id!r} has already ended")
    conn.execute("UPDATE sessions SET ended_at = ? WHERE user_id = ? AND session_id = ?", (at, user_id, session_id))


# -- filters ---------------------------------------------------------------------------------------------


def filter_sql(
    filters: Filters | None, *, annotations: bool = True, after: float | None = None, before: float | None = None
) -> tuple[str, list[object]]:
    """The SQL condition (on blocks ``b``) and parameters of ``filters`` (its annotation pairs only with
    ``annotations``) and the event-time window [after, before)."""
    where: list[str] = []
    params: list[object] = []
    if after is not None:
        where.append("b.event_ts >= ?")
        params.append(after)
    if before is not None:
        where.append("b.event_ts < ?")
        params.append(before)
    if filters is not None:
        if filters.sessions is not None:
            where.append(f"b.session_id IN ({','.join('?' * len(filters.sessions))})" if filters.sessions else "0")
            params += list(filters.sessions)
        if filters.block_ids is not None:
            where.append(f"b.id IN ({','.join('?' * len(filters.block_ids))})" if filters.block_ids else "0")
            params += list(filters.block_ids)
        if annotations:
            for key, value in sorted(filters.annotations.items()):
                where.append("json_extract(b.annotations, ?) = ?")
                params += [json_path(key), value]
        if filters.kinds is not None:
            kinds = sorted(k.value for k in filters.kinds)
            where.append(f"b.kind IN ({','.join('?' * len(kinds))})" if kinds else "0")
            params += kinds
        if filters.ingested_after is not None:
            where.append("b.ingest_ts >= ?")
            params.append(to_epoch(filters.ingested_after))
        if filters.ingested_before is not None:
            where.append("b.ingest_ts < ?")
            params.append(to_epoch(filters.ingested_before))
        if filters.prompt_id is not None:
            where.append("b.prompt_id = ?")
            params.append(filters.prompt_id)
            if filters.prompt_version is not None:
                where.append("b.prompt_version = ?")
                params.append(filters.prompt_version)
    return (" AND ".join(where) or "1 = 1"), params


def expired_block_pks(conn: sqlite3.Connection, user_id: int, now: float) -> list[int]:
    """The user's blocks whose TTL has run out (one seek in the partial expiry index; usually none)."""
    rows = conn.execute(
        "SELECT pk FROM blocks WHERE user_id = ? AND expires_ts IS NOT NULL AND expires_ts <= ?", (user_id, now)
    ).fetchall()
    return [int(r[0]) for r in rows]


def filtered_block_pks(conn: sqlite3.Connection, user_id: int, filters: Filters) -> list[int]:
    """The user's blocks (live or not: the caller leaves out the expired) that pass ``filters``."""
    where, params = filter_sql(filters)
    rows = conn.execute(f"SELECT b.pk FROM blocks b WHERE b.user_id = ? AND {where}", (user_id, *params)).fetchall()
    return [int(r[0]) for r in rows]


def filters_key(filters: Filters) -> tuple[object, ...]:
    """``filters`` as a hashable value (its annotations are a dict)."""
    return (
        filters.sessions,
        filters.block_ids,
        tuple(sorted(filters.annotations.items())),
        filters.annotations_after_cut,
        None if filters.kinds is None else tuple(sorted(filters.kinds)),
        filters.ingested_after,
        filters.ingested_before,
        filters.prompt_id,
        filters.prompt_version,
    )


class FilterCache:
    """The blocks recent filters kept, by (user, user version, filters): a search repeated with the same
    filter (a session, an annotation) skips the SQL that finds them. A write moves the user's version on,
    so an entry is never stale; the least recently used of :data:`FILTER_CACHE_ENTRIES` go first."""

    def __init__(self, entries: int = FILTER_CACHE_ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[tuple[object, ...], BlockSet] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: int, version: int, filters: Filters) -> BlockSet | None:
        key = (user_id, version, filters_key(filters))
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, user_id: int, version: int, filters: Filters, blocks: BlockSet) -> None:
        with self._lock:
            self._items[(user_id, version, filters_key(filters))] = blocks
            while len(self._items) > self.entries:
                self._items.popitem(last=False)


def set_ttl(
    conn: sqlite3.Connection,
    user: str,
    user_id: int,
    ttl_s: int,
    *,
    session_id: str | None,
    block_ids: Sequence[str] | None,
    now: float,
) -> int:
    where = [f"b.user_id = ? AND {LIVE}"]
    params: list[object] = [user_id, now]
    if session_id is not None:
        if session_state(conn, user_id, session_id) is None:
            raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
        where.append("b.session_id = ?")
        params.append(session_id)
    total = 0
    chunks: list[list[str] | None] = [None]
    if block_ids is not None:
        ids = list(dict.fromkeys(block_ids))
        chunks = [ids[i : i + 500] for i in range(0, len(ids), 500)]
    for chunk in chunks:
        clause = list(where)
        extra: list[object] = []
        if chunk is not None:
            clause.append(f"b.id IN ({','.join('?' * len(chunk))})")
            extra = list(chunk)
        total += conn.execute(
            f"UPDATE blocks AS b SET ttl_s = ?, expires_ts = ? WHERE {' AND '.join(clause)}",
            (ttl_s, expiry(now, ttl_s), *params, *extra),
        ).rowcount
    return total


# -- prompts ---------------------------------------------------------------------------------------------

PROMPT_COLUMNS = (
    "p.prompt_id, p.description, p.annotations, p.archived, p.current_version, "
    "(SELECT count(*) FROM prompt_versions v WHERE v.prompt_id = p.prompt_id), p.updated_at, "
    "(SELECT v.text FROM prompt_versions v WHERE v.prompt_id = p.prompt_id AND v.version = p.current_version), "
    "p.created_at"
)


def _prompt(row: Sequence[Any]) -> Prompt:
    pid, description, annotations, archived, current, count, updated, text, created = row
    return Prompt(
        prompt_id=str(pid),
        description=str(description),
        annotations={str(k): str(v) for k, v in dict(_json(annotations)).items()},
        archived=bool(archived),
        current_version=int(current),
        version_count=int(count),
        updated_at=from_epoch(float(updated)),
        text="" if text is None else str(text),
        created_at=from_epoch(float(created)),
    )


def get_prompt(conn: sqlite3.Connection, prompt_id: str) -> Prompt:
    row = conn.execute(f"SELECT {PROMPT_COLUMNS} FROM prompts p WHERE p.prompt_id = ?", (prompt_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"prompt {prompt_id!r} not found")
    return _prompt(row)


def create_prompt(
    conn: sqlite3.Connection, prompt_id: str, text: str, description: str, annotations: Mapping[str, str], now: float
) -> Prompt:
    cur = conn.execute(
        "INSERT OR IGNORE INTO prompts(prompt_id, description, annotations, current_version, next_version, "
        "created_at, updated_at) VALUES (?, ?, ?, 0, 1, ?, ?)",
        (prompt_id, description, _dumps(annotations), now, now),
    )
    if cur.rowcount != 1:
        raise AlreadyExistsError("prompt", prompt_id)
    conn.execute(
        "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (?, 0, ?, ?)", (prompt_id, text, now)
    )
    return get_prompt(conn, prompt_id)


def get_version(conn: sqlite3.Connection, prompt_id: str, version: int | None) -> PromptVersion:
    row = conn.execute(
        "SELECT v.prompt_id, v.version, v.text, v.created_at, v.archived OR p.archived, "
        "v.version = p.current_version FROM prompt_versions v JOIN prompts p ON p.prompt_id = v.prompt_id "
        "WHERE v.prompt_id = ? AND v.version = coalesce(?, p.current_version)",
        (prompt_id, version),
    ).fetchone()
    if row is None:
        at = "" if version is None else f" version {version}"
        raise NotFoundError(f"prompt {prompt_id!r}{at} not found")
    return _version(row)


def _version(row: Sequence[Any]) -> PromptVersion:
    pid, version, text, created, archived, current = row
    return PromptVersion(
        prompt_id=str(pid),
        version=int(version),
        text=str(text),
        created_at=from_epoch(float(created)),
        archived=bool(archived),
        is_current=bool(current),
    )


def list_prompts(conn: sqlite3.Connection, limit: int, offset: int, include_archived: bool) -> Page[Prompt]:
    where = "" if include_archived else " WHERE p.archived = 0"
    total = int(conn.execute(f"SELECT count(*) FROM prompts p{where}").fetchone()[0])
    rows = conn.execute(
        f"SELECT {PROMPT_COLUMNS} FROM prompts p{where} ORDER BY p.prompt_id LIMIT ? OFFSET ?", (limit, offset)
    ).fetchall()
    return Page([_prompt(r) for r in rows], total, limit, offset)


def list_versions(conn: sqlite3.Connection, prompt_id: str, limit: int, offset: int) -> Page[PromptVersion]:
    get_prompt(conn, prompt_id)
    total = int(conn.execute("SELECT count(*) FROM prompt_versions WHERE prompt_id = ?", (prompt_id,)).fetchone()[0])
    rows = conn.execute(
        "SELECT v.prompt_id, v.version, v.text, v.created_at, v.archived OR p.archived, "
        "v.version = p.current_version FROM prompt_versions v JOIN prompts p ON p.prompt_id = v.prompt_id "
        "WHERE v.prompt_id = ? ORDER BY v.version DESC LIMIT ? OFFSET ?",
        (prompt_id, limit, offset),
    ).fetchall()
    return Page([_version(r) for r in rows], total, limit, offset)


def update_prompt(
    conn: sqlite3.Connection,
    prompt_id: str,
    *,
    text: str | None,
    description: str | None,
    annotations: Mapping[str, str] | None,
    now: float,
) -> Prompt:
    head = get_prompt(conn, prompt_id)
    if head.archived:
        raise PromptArchivedError(prompt_id)
    if text is not None and text != head.text:
        (version,) = conn.execute(
            "UPDATE prompts SET next_version = next_version + 1 WHERE prompt_id = ? RETURNING next_version - 1",
            (prompt_id,),
        ).fetchone()
        conn.execute(
            "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (?, ?, ?, ?)",
            (prompt_id, int(version), text, now),
        )
        conn.execute("UPDATE prompts SET current_version = ? WHERE prompt_id = ?", (int(version), prompt_id))
    if description is not None:
        conn.execute("UPDATE prompts SET description = ? WHERE prompt_id = ?", (description, prompt_id))
    if annotations is not None:
        conn.execute("UPDATE prompts SET annotations = ? WHERE prompt_id = ?", (_dumps(annotations), prompt_id))
    conn.execute("UPDATE prompts SET updated_at = ? WHERE prompt_id = ?", (now, prompt_id))
    return get_prompt(conn, prompt_id)


def archive_prompt(conn: sqlite3.Connection, prompt_id: str, version: int | None, now: float) -> Prompt:
    get_prompt(conn, prompt_id)
    if version is None:
        conn.execute("UPDATE prompts SET archived = 1, updated_at = ? WHERE prompt_id = ?", (now, prompt_id))
    else:
        get_version(conn, prompt_id, version)
        conn.execute(
            "UPDATE prompt_versions SET archived = 1 WHERE prompt_id = ? AND version = ?", (prompt_id, version)
        )
        conn.execute("UPDATE prompts SET updated_at = ? WHERE prompt_id = ?", (now, prompt_id))
    return get_prompt(conn, prompt_id)


def purge_prompt(conn: sqlite3.Connection, prompt_id: str, version: int | None) -> int:
    head = get_prompt(conn, prompt_id)
    if version is None:
        n = conn.execute("DELETE FROM prompt_versions WHERE prompt_id = ?", (prompt_id,)).rowcount
        conn.execute("DELETE FROM prompts WHERE prompt_id = ?", (prompt_id,))
        return int(n)
    get_version(conn, prompt_id, version)
    if version == head.current_version:
        if head.version_count > 1:
            raise ConflictError(
                f"version {version} is the current version of prompt {prompt_id!r}: purge the others, or the prompt"
            )
        return purge_prompt(conn, prompt_id, None)
    return int(
        conn.execute("DELETE FROM prompt_versions WHERE prompt_id = ? AND version = ?", (prompt_id, version)).rowcount
    )


def usable_version(conn: sqlite3.Connection, prompt_id: str, version: int | None) -> PromptVersion:
    """The version an add or update names: NotFoundError if unknown, PromptArchivedError if archived."""
    found = get_version(conn, prompt_id, version)
    if found.archived:
        raise PromptArchivedError(prompt_id, found.version)
    return found
