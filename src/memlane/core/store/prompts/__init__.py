"""The extraction prompt registry: one for the store (a small reference table, not per user). Versions are
immutable and never reused.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from memlane.core.model import Page, Prompt, PromptVersion


@dataclass(frozen=True, slots=True)
class PromptChange:
    """What :meth:`Prompts.update_prompt` changes of a prompt (None: keep it).

    ``text``: new text adds the next version, which becomes current (the same text as the current one adds
    nothing); ``description``, ``annotations``: replace the prompt's; ``now``: when, its ``updated_at`` and
    the new version's ``created_at``."""

    now: float
    text: str | None = None
    description: str | None = None
    annotations: Mapping[str, str] | None = None


class Prompts(Protocol):
    """The extraction prompt registry: one for the store (a small reference table, not per user). Versions are
    immutable and never reused."""

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        """Version 0 of a new prompt; AlreadyExistsError if the id is taken (archived ids too)."""
        ...

    def get_prompt(self, prompt_id: str) -> Prompt:
        """The prompt's head (archived ones too); NotFoundError if unknown."""
        ...

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        """One version (None: the current one); NotFoundError if unknown (purged versions too)."""
        ...

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        """Prompts by id, paged, with the total."""
        ...

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        """The prompt's versions, newest first, paged, with the total; NotFoundError if unknown."""
        ...

    def update_prompt(self, prompt_id: str, change: PromptChange) -> Prompt:
        """Apply ``change`` to the prompt. PromptArchivedError for an archived prompt, NotFoundError for an
        unknown one."""
        ...

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        """Archive one version, or with None the whole prompt (its id stays reserved)."""
        ...

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        """Delete one version (ConflictError for the current one of a prompt that has others), or with
        None the whole prompt (the id is free again); returns how many versions went. Blocks keep the
        id/version they recorded."""
        ...
