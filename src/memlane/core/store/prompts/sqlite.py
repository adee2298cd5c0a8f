"""The extraction prompt registry in the SQLite store: versions are immutable, numbered from 0 and never reused; an
archived prompt keeps its id reserved, a purged one frees it. :class:`SqlitePrompts` is the store's
:class:`memlane.core.store.prompts.Prompts`."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from memlane.core.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    PromptArchivedError,
)
from memlane.core.model import (
    Page,
    Prompt,
    PromptVersion,
)
from memlane.core.store.prompts import PromptChange
from memlane.core.store.sqlite.base import SqliteBase, json_text, json_value
from memlane.core.timefmt import from_epoch

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
        annotations={str(k): str(v) for k, v in dict(json_value(annotations)).items()},
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
        (prompt_id, description, json_text(annotations), now, now),
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


def update_prompt(conn: sqlite3.Connection, prompt_id: str, change: PromptChange) -> Prompt:
    head = get_prompt(conn, prompt_id)
    if head.archived:
        raise PromptArchivedError(prompt_id)
    if change.text is not None and change.text != head.text:
        (version,) = conn.execute(
            "UPDATE prompts SET next_version = next_version + 1 WHERE prompt_id = ? RETURNING next_version - 1",
            (prompt_id,),
        ).fetchone()
        conn.execute(
            "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (?, ?, ?, ?)",
            (prompt_id, int(version), change.text, change.now),
        )
        conn.execute("UPDATE prompts SET current_version = ? WHERE prompt_id = ?", (int(version), prompt_id))
    if change.description is not None:
        conn.execute("UPDATE prompts SET description = ? WHERE prompt_id = ?", (change.description, prompt_id))
    if change.annotations is not None:
        conn.execute(
            "UPDATE prompts SET annotations = ? WHERE prompt_id = ?", (json_text(change.annotations), prompt_id)
        )
    conn.execute("UPDATE prompts SET updated_at = ? WHERE prompt_id = ?", (change.now, prompt_id))
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


class SqlitePrompts(SqliteBase):
    """The prompt registry of a SQLite store."""

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        with self._write() as conn:
            return create_prompt(conn, prompt_id, text, description, annotations, now)

    def get_prompt(self, prompt_id: str) -> Prompt:
        found: Prompt = self._read_with(get_prompt, prompt_id)
        return found

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        found: PromptVersion = self._read_with(get_version, prompt_id, version)
        return found

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        page: Page[Prompt] = self._read_with(list_prompts, limit, offset, include_archived)
        return page

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        page: Page[PromptVersion] = self._read_with(list_versions, prompt_id, limit, offset)
        return page

    def update_prompt(self, prompt_id: str, change: PromptChange) -> Prompt:
        with self._write() as conn:
            return update_prompt(conn, prompt_id, change)

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        with self._write() as conn:
            return archive_prompt(conn, prompt_id, version, now)

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        with self._write() as conn:
            return purge_prompt(conn, prompt_id, version)
