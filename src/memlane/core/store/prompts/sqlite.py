"""The extraction prompt registry in the SQLite store: versions are immutable, numbered from 0 and never reused; an
archived prompt keeps its id reserved, a purged one frees it. :class:`SqlitePromptRows` is the registry's
statements (:class:`memlane.core.store.prompts.registry.PromptRows`), inside the caller's transaction;
:class:`SqlitePrompts` is the store's :class:`memlane.core.store.prompts.Prompts`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from memlane.core.errors import NotFoundError
from memlane.core.model import Page, Prompt, PromptVersion
from memlane.core.store.prompts import PromptChange
from memlane.core.store.prompts.registry import VERSIONS, PromptRows, PromptStore, prompt_row, version_row
from memlane.core.store.sqlite.base import SqliteBase, json_text
from memlane.core.store.sqlite.probe import store_error

PROMPT_COLUMNS = (
    "p.prompt_id, p.description, p.annotations, p.archived, p.current_version, "
    "(SELECT count(*) FROM prompt_versions v WHERE v.prompt_id = p.prompt_id), p.updated_at, "
    "(SELECT v.text FROM prompt_versions v WHERE v.prompt_id = p.prompt_id AND v.version = p.current_version), "
    "p.created_at"
)


@dataclass(frozen=True, slots=True)
class SqlitePromptRows:
    """The prompt registry's statements on one connection, in its transaction (a write transaction holds
    the whole file, so ``lock`` needs nothing more)."""

    conn: sqlite3.Connection

    def head(self, prompt_id: str, *, lock: bool = False) -> Prompt:
        sql = f"SELECT {PROMPT_COLUMNS} FROM prompts p WHERE p.prompt_id = ?"
        row = self.conn.execute(sql, (prompt_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"prompt {prompt_id!r} not found")
        return prompt_row(row)

    def version(self, prompt_id: str, number: int | None) -> PromptVersion:
        row = self.conn.execute(
            f"{VERSIONS} WHERE v.prompt_id = ? AND v.version = coalesce(?, p.current_version)",
            (prompt_id, number),
        ).fetchone()
        if row is None:
            at = "" if number is None else f" version {number}"
            raise NotFoundError(f"prompt {prompt_id!r}{at} not found")
        return version_row(row)

    def heads(self, limit: int, offset: int, include_archived: bool) -> Page[Prompt]:
        where = "" if include_archived else " WHERE p.archived = 0"
        total = int(self.conn.execute(f"SELECT count(*) FROM prompts p{where}").fetchone()[0])
        rows = self.conn.execute(
            f"SELECT {PROMPT_COLUMNS} FROM prompts p{where} ORDER BY p.prompt_id LIMIT ? OFFSET ?", (limit, offset)
        ).fetchall()
        return Page([prompt_row(r) for r in rows], total, limit, offset)

    def versions(self, prompt_id: str, limit: int, offset: int) -> Page[PromptVersion]:
        self.head(prompt_id)
        (total,) = self.conn.execute(
            "SELECT count(*) FROM prompt_versions WHERE prompt_id = ?", (prompt_id,)
        ).fetchone()
        rows = self.conn.execute(
            f"{VERSIONS} WHERE v.prompt_id = ? ORDER BY v.version DESC LIMIT ? OFFSET ?",
            (prompt_id, limit, offset),
        ).fetchall()
        return Page([version_row(r) for r in rows], int(total), limit, offset)

    def insert(self, prompt_id: str, text: str, description: str, annotations: Mapping[str, str], now: float) -> bool:
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO prompts(prompt_id, description, annotations, current_version, next_version, "
            "created_at, updated_at) VALUES (?, ?, ?, 0, 1, ?, ?)",
            (prompt_id, description, json_text(annotations), now, now),
        )
        if cur.rowcount == 1:
            self.conn.execute(
                "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (?, 0, ?, ?)",
                (prompt_id, text, now),
            )
        return cur.rowcount == 1

    def add_version(self, prompt_id: str, text: str, now: float) -> None:
        (version,) = self.conn.execute(
            "UPDATE prompts SET next_version = next_version + 1 WHERE prompt_id = ? RETURNING next_version - 1",
            (prompt_id,),
        ).fetchone()
        self.conn.execute(
            "INSERT INTO prompt_versions(prompt_id, version, text, created_at) VALUES (?, ?, ?, ?)",
            (prompt_id, int(version), text, now),
        )
        self.conn.execute("UPDATE prompts SET current_version = ? WHERE prompt_id = ?", (int(version), prompt_id))

    def set_fields(self, prompt_id: str, change: PromptChange) -> None:
        annotations = None if change.annotations is None else json_text(change.annotations)
        self.conn.execute(
            "UPDATE prompts SET description = coalesce(?, description), annotations = coalesce(?, annotations), "
            "updated_at = ? WHERE prompt_id = ?",
            (change.description, annotations, change.now, prompt_id),
        )

    def archive(self, prompt_id: str, number: int | None, now: float) -> None:
        if number is None:
            self.conn.execute("UPDATE prompts SET archived = 1, updated_at = ? WHERE prompt_id = ?", (now, prompt_id))
            return
        self.conn.execute(
            "UPDATE prompt_versions SET archived = 1 WHERE prompt_id = ? AND version = ?", (prompt_id, number)
        )
        self.conn.execute("UPDATE prompts SET updated_at = ? WHERE prompt_id = ?", (now, prompt_id))

    def delete(self, prompt_id: str, number: int | None) -> int:
        n = self.conn.execute(
            "DELETE FROM prompt_versions WHERE prompt_id = ? AND version = coalesce(?, version)", (prompt_id, number)
        ).rowcount
        if number is None:
            self.conn.execute("DELETE FROM prompts WHERE prompt_id = ?", (prompt_id,))
        return int(n)


class SqlitePrompts(PromptStore, SqliteBase):
    @contextmanager
    def _prompt_rows(self, *, write: bool) -> Iterator[PromptRows]:
        if write:
            with self._write() as conn:
                yield SqlitePromptRows(conn)
            return
        try:
            yield SqlitePromptRows(self._conn())
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
