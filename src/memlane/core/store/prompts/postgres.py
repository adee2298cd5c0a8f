"""The extraction prompt registry in the PostgreSQL store: two small tables shared by every user
(``prompts``, ``prompt_versions``: reference tables on a distributed PostgreSQL). Versions are immutable,
numbered from 0 and never reused (``prompts.next_version``); an archived prompt keeps its id reserved, a
purged one frees it. :class:`PostgresPromptRows` is the registry's statements
(:class:`memlane.core.store.prompts.registry.PromptRows`), inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memlane.core.errors import NotFoundError
from memlane.core.model import Page, Prompt, PromptVersion
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.prompts import PromptChange
from memlane.core.store.prompts.registry import VERSIONS, PromptRows, PromptStore, prompt_row, version_row

# A join and a grouping, not subqueries correlated with a shared table (docs/scaling.md: distributable).
_HEAD = (
    "SELECT p.prompt_id, p.description, p.annotations, p.archived, p.current_version, count(v.version), "
    "p.updated_at, max(v.text) FILTER (WHERE v.version = p.current_version), p.created_at "
    "FROM prompts p LEFT JOIN prompt_versions v ON v.prompt_id = p.prompt_id {where} GROUP BY p.prompt_id"
)


@dataclass(frozen=True, slots=True)
class PostgresPromptRows:
    """The prompt registry's statements on one connection, in its transaction."""

    conn: Conn

    def head(self, prompt_id: str, *, lock: bool = False) -> Prompt:
        if lock:
            self.conn.execute("SELECT 1 FROM prompts WHERE prompt_id = %s FOR UPDATE", (prompt_id,))
        row = self.conn.execute(_HEAD.format(where="WHERE p.prompt_id = %s"), (prompt_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"prompt {prompt_id!r} not found")
        return prompt_row(row)

    def version(self, prompt_id: str, number: int | None) -> PromptVersion:
        self.head(prompt_id)
        where = "v.version = p.current_version" if number is None else "v.version = %s"
        params: tuple[Any, ...] = (prompt_id,) if number is None else (prompt_id, number)
        row = self.conn.execute(f"{VERSIONS} WHERE v.prompt_id = %s AND {where}", params).fetchone()
        if row is None:
            raise NotFoundError(f"prompt {prompt_id!r} has no version {number}")
        return version_row(row)

    def heads(self, limit: int, offset: int, include_archived: bool) -> Page[Prompt]:
        where = "" if include_archived else " WHERE NOT p.archived"
        total = self.conn.execute(f"SELECT count(*) FROM prompts p{where}").fetchone()
        rows = self.conn.execute(
            _HEAD.format(where=where) + " ORDER BY p.prompt_id LIMIT %s OFFSET %s", (limit, offset)
        ).fetchall()
        return Page([prompt_row(r) for r in rows], int(total[0]) if total else 0, limit, offset)

    def versions(self, prompt_id: str, limit: int, offset: int) -> Page[PromptVersion]:
        head = self.head(prompt_id)
        rows = self.conn.execute(
            f"{VERSIONS} WHERE v.prompt_id = %s ORDER BY v.version DESC LIMIT %s OFFSET %s", (prompt_id, limit, offset)
        ).fetchall()
        return Page([version_row(r) for r in rows], head.version_count, limit, offset)

    def insert(self, prompt_id: str, text: str, description: str, annotations: Mapping[str, str], now: float) -> bool:
        row = self.conn.execute(
            "INSERT INTO prompts(prompt_id, description, annotations, current_version, next_version, created_at, "
            "updated_at) VALUES (%s, %s, %s::jsonb, 0, 1, %s, %s) ON CONFLICT (prompt_id) DO NOTHING RETURNING 1",
            (prompt_id, description, json.dumps(dict(annotations)), now, now),
        ).fetchone()
        if row is not None:
            self.conn.execute(
                "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (%s, 0, %s, %s)",
                (prompt_id, text, now),
            )
        return row is not None

    def add_version(self, prompt_id: str, text: str, now: float) -> None:
        row = self.conn.execute(
            "UPDATE prompts SET current_version = next_version, next_version = next_version + 1 "
            "WHERE prompt_id = %s RETURNING current_version",
            (prompt_id,),
        ).fetchone()
        assert row is not None
        self.conn.execute(
            "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (%s, %s, %s, %s)",
            (prompt_id, int(row[0]), text, now),
        )

    def set_fields(self, prompt_id: str, change: PromptChange) -> None:
        annotations = None if change.annotations is None else json.dumps(dict(change.annotations))
        self.conn.execute(
            "UPDATE prompts SET description = coalesce(%s, description), "
            "annotations = coalesce(%s::jsonb, annotations), updated_at = %s WHERE prompt_id = %s",
            (change.description, annotations, change.now, prompt_id),
        )

    def archive(self, prompt_id: str, number: int | None, now: float) -> None:
        if number is not None:
            self.conn.execute(
                "UPDATE prompt_versions SET archived = true WHERE prompt_id = %s AND version = %s", (prompt_id, number)
            )
        else:
            self.conn.execute("UPDATE prompts SET archived = true WHERE prompt_id = %s", (prompt_id,))
        self.conn.execute("UPDATE prompts SET updated_at = %s WHERE prompt_id = %s", (now, prompt_id))

    def delete(self, prompt_id: str, number: int | None) -> int:
        if number is not None:
            return int(
                self.conn.execute(
                    "DELETE FROM prompt_versions WHERE prompt_id = %s AND version = %s", (prompt_id, number)
                ).rowcount
            )
        n = self.conn.execute("DELETE FROM prompt_versions WHERE prompt_id = %s", (prompt_id,)).rowcount
        self.conn.execute("DELETE FROM prompts WHERE prompt_id = %s", (prompt_id,))
        return int(n)


class PostgresPrompts(PromptStore, PostgresBase):
    @contextmanager
    def _prompt_rows(self, *, write: bool) -> Iterator[PromptRows]:
        with self.transaction() as conn:
            yield PostgresPromptRows(conn)
