"""The extraction prompt registry in the PostgreSQL store: two small tables shared by every user
(``prompts``, ``prompt_versions``: reference tables on a distributed PostgreSQL). Versions are immutable,
numbered from 0 and never reused (``prompts.next_version``); an archived prompt keeps its id reserved, a
purged one frees it. Each function runs inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.prompts import PromptChange
from memlane.core.timefmt import from_epoch

# A join and a grouping, not subqueries correlated with a shared table (docs/scaling.md: distributable).
_HEAD = (
    "SELECT p.prompt_id, p.description, p.annotations, p.archived, p.current_version, count(v.version), "
    "p.updated_at, max(v.text) FILTER (WHERE v.version = p.current_version), p.created_at "
    "FROM prompts p LEFT JOIN prompt_versions v ON v.prompt_id = p.prompt_id {where} GROUP BY p.prompt_id"
)


_VERSION = (
    "SELECT v.prompt_id, v.version, v.text, v.created_at, v.archived OR p.archived, v.version = p.current_version "
    "FROM prompt_versions v JOIN prompts p USING (prompt_id)"
)


def _head(r: tuple[Any, ...]) -> Prompt:
    ann = r[2] if not isinstance(r[2], str | bytes) else json.loads(r[2])
    return Prompt(
        prompt_id=str(r[0]),
        description=str(r[1]),
        annotations={str(k): str(v) for k, v in dict(ann).items()},
        archived=bool(r[3]),
        current_version=int(r[4]),
        version_count=int(r[5]),
        updated_at=from_epoch(float(r[6])),
        text="" if r[7] is None else str(r[7]),
        created_at=from_epoch(float(r[8])),
    )


def _version(r: tuple[Any, ...]) -> PromptVersion:
    return PromptVersion(
        prompt_id=str(r[0]),
        version=int(r[1]),
        text=str(r[2]),
        created_at=from_epoch(float(r[3])),
        archived=bool(r[4]),
        is_current=bool(r[5]),
    )


def head_row(conn: Conn, prompt_id: str, *, lock: bool = False) -> Prompt:
    if lock:
        conn.execute("SELECT 1 FROM prompts WHERE prompt_id = %s FOR UPDATE", (prompt_id,))
    row = conn.execute(_HEAD.format(where="WHERE p.prompt_id = %s"), (prompt_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"prompt {prompt_id!r} not found")
    return _head(row)


def insert_head(
    conn: Conn, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
) -> Prompt:
    row = conn.execute(
        "INSERT INTO prompts(prompt_id, description, annotations, current_version, next_version, created_at, "
        "updated_at) VALUES (%s, %s, %s::jsonb, 0, 1, %s, %s) ON CONFLICT (prompt_id) DO NOTHING RETURNING 1",
        (prompt_id, description, json.dumps(dict(annotations)), now, now),
    ).fetchone()
    if row is None:
        raise AlreadyExistsError("prompt", prompt_id)
    conn.execute(
        "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (%s, 0, %s, %s)",
        (prompt_id, text, now),
    )
    return head_row(conn, prompt_id)


def version_row(conn: Conn, prompt_id: str, number: int | None) -> PromptVersion:
    head_row(conn, prompt_id)
    where = "v.version = p.current_version" if number is None else "v.version = %s"
    params: tuple[Any, ...] = (prompt_id,) if number is None else (prompt_id, number)
    row = conn.execute(f"{_VERSION} WHERE v.prompt_id = %s AND {where}", params).fetchone()
    if row is None:
        raise NotFoundError(f"prompt {prompt_id!r} has no version {number}")
    return _version(row)


def list_heads(conn: Conn, *, limit: int, offset: int, include_archived: bool) -> Page[Prompt]:
    where = "" if include_archived else " WHERE NOT p.archived"
    total = conn.execute(f"SELECT count(*) FROM prompts p{where}").fetchone()
    rows = conn.execute(
        _HEAD.format(where=where) + " ORDER BY p.prompt_id LIMIT %s OFFSET %s", (limit, offset)
    ).fetchall()
    return Page([_head(r) for r in rows], int(total[0]) if total else 0, limit, offset)


def list_versions(conn: Conn, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
    head = head_row(conn, prompt_id)
    rows = conn.execute(
        f"{_VERSION} WHERE v.prompt_id = %s ORDER BY v.version DESC LIMIT %s OFFSET %s", (prompt_id, limit, offset)
    ).fetchall()
    return Page([_version(r) for r in rows], head.version_count, limit, offset)


def update_head(conn: Conn, prompt_id: str, change: PromptChange) -> Prompt:
    head = head_row(conn, prompt_id, lock=True)
    if head.archived:
        raise PromptArchivedError(prompt_id)
    if change.text is not None and change.text != head.text:
        row = conn.execute(
            "UPDATE prompts SET current_version = next_version, next_version = next_version + 1 "
            "WHERE prompt_id = %s RETURNING current_version",
            (prompt_id,),
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (%s, %s, %s, %s)",
            (prompt_id, int(row[0]), change.text, change.now),
        )
    if change.description is not None:
        conn.execute("UPDATE prompts SET description = %s WHERE prompt_id = %s", (change.description, prompt_id))
    if change.annotations is not None:
        conn.execute(
            "UPDATE prompts SET annotations = %s::jsonb WHERE prompt_id = %s",
            (json.dumps(dict(change.annotations)), prompt_id),
        )
    conn.execute("UPDATE prompts SET updated_at = %s WHERE prompt_id = %s", (change.now, prompt_id))
    return head_row(conn, prompt_id)


def archive_rows(conn: Conn, prompt_id: str, number: int | None, now: float) -> Prompt:
    head_row(conn, prompt_id, lock=True)
    if number is None:
        conn.execute("UPDATE prompts SET archived = true, updated_at = %s WHERE prompt_id = %s", (now, prompt_id))
    else:
        version_row(conn, prompt_id, number)
        conn.execute(
            "UPDATE prompt_versions SET archived = true WHERE prompt_id = %s AND version = %s", (prompt_id, number)
        )
        conn.execute("UPDATE prompts SET updated_at = %s WHERE prompt_id = %s", (now, prompt_id))
    return head_row(conn, prompt_id)


def purge_rows(conn: Conn, prompt_id: str, number: int | None) -> int:
    head = head_row(conn, prompt_id, lock=True)
    if number is None:
        n = conn.execute("DELETE FROM prompt_versions WHERE prompt_id = %s", (prompt_id,)).rowcount
        conn.execute("DELETE FROM prompts WHERE prompt_id = %s", (prompt_id,))
        return int(n)
    version_row(conn, prompt_id, number)
    if number == head.current_version:
        if head.version_count > 1:
            raise ConflictError(
                f"version {number} is the current version of prompt {prompt_id!r}: purge the others, or the "
                "whole prompt"
            )
        conn.execute("DELETE FROM prompts WHERE prompt_id = %s", (prompt_id,))  # its only version: the prompt goes
        return 1
    conn.execute("DELETE FROM prompt_versions WHERE prompt_id = %s AND version = %s", (prompt_id, number))
    return 1


class PostgresPrompts(PostgresBase):
    """The prompt registry of a PostgreSQL store."""

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        with self.transaction() as conn:
            return insert_head(conn, prompt_id, text, description=description, annotations=annotations, now=now)

    def get_prompt(self, prompt_id: str) -> Prompt:
        with self.transaction() as conn:
            return head_row(conn, prompt_id)

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        with self.transaction() as conn:
            return version_row(conn, prompt_id, version)

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        with self.transaction() as conn:
            return list_heads(conn, limit=limit, offset=offset, include_archived=include_archived)

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        with self.transaction() as conn:
            return list_versions(conn, prompt_id, limit=limit, offset=offset)

    def update_prompt(self, prompt_id: str, change: PromptChange) -> Prompt:
        with self.transaction() as conn:
            return update_head(conn, prompt_id, change)

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        with self.transaction() as conn:
            return archive_rows(conn, prompt_id, version, now)

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        with self.transaction() as conn:
            return purge_rows(conn, prompt_id, version)
