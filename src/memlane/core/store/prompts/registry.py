"""The prompt registry's rules, written once for both dialects: :class:`PromptStore` is the store's
:class:`memlane.core.store.prompts.Prompts` over a dialect's statements (:class:`PromptRows`, in
``sqlite.py`` and ``postgres.py``), each call one transaction of the dialect's."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from memlane.core.errors import AlreadyExistsError, ConflictError, PromptArchivedError
from memlane.core.model import Page, Prompt, PromptVersion
from memlane.core.store.prompts import PromptChange
from memlane.core.timefmt import from_epoch


def prompt_row(row: Sequence[Any]) -> Prompt:
    """A prompt's head from a row of (prompt_id, description, annotations as a JSON object or its text,
    archived, current_version, version count, updated_at, the current version's text, created_at)."""
    pid, description, annotations, archived, current, count, updated, text, created = row
    if isinstance(annotations, str | bytes):
        annotations = json.loads(annotations)
    return Prompt(
        prompt_id=str(pid),
        description=str(description),
        annotations={str(k): str(v) for k, v in dict(annotations).items()},
        archived=bool(archived),
        current_version=int(current),
        version_count=int(count),
        updated_at=from_epoch(float(updated)),
        text="" if text is None else str(text),
        created_at=from_epoch(float(created)),
    )


# The versions with what version_row reads, the same in both dialects (a WHERE and an ORDER BY follow).
VERSIONS = (
    "SELECT v.prompt_id, v.version, v.text, v.created_at, v.archived OR p.archived, v.version = p.current_version "
    "FROM prompt_versions v JOIN prompts p USING (prompt_id)"
)


def version_row(row: Sequence[Any]) -> PromptVersion:
    """A version from a row of :data:`VERSIONS`: (prompt_id, version, text, created_at, archived (it or its
    prompt), current)."""
    pid, version, text, created, archived, current = row
    return PromptVersion(
        prompt_id=str(pid),
        version=int(version),
        text=str(text),
        created_at=from_epoch(float(created)),
        archived=bool(archived),
        is_current=bool(current),
    )


class PromptRows(Protocol):
    """One dialect's statements over the two prompt tables, inside the caller's transaction."""

    def head(self, prompt_id: str, *, lock: bool = False) -> Prompt:
        """The prompt's head (archived ones too), its row locked for the transaction if ``lock`` (where
        the dialect needs it); NotFoundError if unknown."""
        ...

    def version(self, prompt_id: str, number: int | None) -> PromptVersion:
        """One version (None: the current one); NotFoundError if the prompt or the version is unknown."""
        ...

    def heads(self, limit: int, offset: int, include_archived: bool) -> Page[Prompt]: ...

    def versions(self, prompt_id: str, limit: int, offset: int) -> Page[PromptVersion]:
        """The prompt's versions, newest first; NotFoundError if the prompt is unknown."""
        ...

    def insert(self, prompt_id: str, text: str, description: str, annotations: Mapping[str, str], now: float) -> bool:
        """A new prompt with its version 0; False, writing nothing, if the id is taken."""
        ...

    def add_version(self, prompt_id: str, text: str, now: float) -> None:
        """The prompt's next version number (never reused) with ``text``, made current."""
        ...

    def set_fields(self, prompt_id: str, change: PromptChange) -> None:
        """The change's description and annotations (those given), and ``updated_at``."""
        ...

    def archive(self, prompt_id: str, number: int | None, now: float) -> None:
        """Archive the version (None: the prompt) and set ``updated_at``."""
        ...

    def delete(self, prompt_id: str, number: int | None) -> int:
        """Delete the version (None: the prompt and all its versions); returns how many versions went."""
        ...


class PromptStore:
    """:class:`memlane.core.store.prompts.Prompts` over :meth:`_prompt_rows`, which a dialect's store
    provides: its statements in one of its transactions (a write one if ``write``)."""

    def _prompt_rows(self, *, write: bool) -> AbstractContextManager[PromptRows]:
        raise NotImplementedError

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        with self._prompt_rows(write=True) as rows:
            if not rows.insert(prompt_id, text, description, annotations, now):
                raise AlreadyExistsError("prompt", prompt_id)
            return rows.head(prompt_id)

    def get_prompt(self, prompt_id: str) -> Prompt:
        with self._prompt_rows(write=False) as rows:
            return rows.head(prompt_id)

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        with self._prompt_rows(write=False) as rows:
            return rows.version(prompt_id, version)

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        with self._prompt_rows(write=False) as rows:
            return rows.heads(limit, offset, include_archived)

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        with self._prompt_rows(write=False) as rows:
            return rows.versions(prompt_id, limit, offset)

    def update_prompt(self, prompt_id: str, change: PromptChange) -> Prompt:
        with self._prompt_rows(write=True) as rows:
            head = rows.head(prompt_id, lock=True)
            if head.archived:
                raise PromptArchivedError(prompt_id)
            if change.text is not None and change.text != head.text:
                rows.add_version(prompt_id, change.text, change.now)
            rows.set_fields(prompt_id, change)
            return rows.head(prompt_id)

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        with self._prompt_rows(write=True) as rows:
            rows.head(prompt_id, lock=True)
            if version is not None:
                rows.version(prompt_id, version)
            rows.archive(prompt_id, version, now)
            return rows.head(prompt_id)

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        with self._prompt_rows(write=True) as rows:
            head = rows.head(prompt_id, lock=True)
            if version is None:
                return rows.delete(prompt_id, None)
            rows.version(prompt_id, version)
            if version != head.current_version:
                return rows.delete(prompt_id, version)
            if head.version_count > 1:
                raise ConflictError(
                    f"version {version} is the current version of prompt {prompt_id!r}: purge the others, or the "
                    "whole prompt"
                )
            return rows.delete(prompt_id, None)  # its only version: the prompt goes
