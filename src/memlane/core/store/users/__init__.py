"""A store's users: their names, display names and metadata, their deletion (with the deletion epoch that keeps a
deleted user deleted: docs/design/005-user-lifecycle.md) and their row counts.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from memlane.core.model import DeletedUser, Page, UserInfo


class Users(Protocol):
    """A store's users: their names, display names and metadata, their deletion (with the deletion epoch that
    keeps a deleted user deleted: docs/design/005-user-lifecycle.md) and their row counts."""

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        """Create the user with its display name and metadata (a JSON object); False, changing nothing, if
        it exists (the caller that asked to create raises AlreadyExistsError)."""
        ...

    def list_users(self) -> list[UserInfo]: ...

    def get_user(self, user: str) -> UserInfo:
        """The user with display name, metadata, session count and last activity; NotFoundError if unknown."""
        ...

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        """Replace what is given (None: keep; ``display_name=""`` clears it); NotFoundError if unknown."""
        ...

    def find_users(
        self,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        contains: str | None = None,
        metadata_text: Mapping[str, str] | None = None,
    ) -> Page[UserInfo]:
        """Users by name order whose display name is exactly ``name``, whose metadata holds every
        ``metadata`` pair with an equal JSON value, and every ``metadata_text`` pair read as text (a string
        equal to it, or a number or boolean whose JSON text is), and whose name or display name holds
        ``contains`` ignoring case (its ``%`` and ``_`` are plain characters) (None: no such rule), paged,
        with the total."""
        ...

    def delete_user(self, user: str) -> DeletedUser:
        """Everything of the user, API keys included, in one transaction that also raises the deletion
        epoch and records the name's tombstone (memlane.core.store.users.deletions)."""
        ...

    def deletion_epoch(self) -> int: ...

    def user_row_counts(self, user: str) -> dict[str, int]: ...
