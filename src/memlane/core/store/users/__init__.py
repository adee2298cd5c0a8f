"""A store's users: their names, display names and metadata, their deletion (with the deletion epoch that keeps a
deleted user deleted: docs/design/005-user-lifecycle.md) and their row counts.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from memlane.core.model import DeletedUser, Page, UserInfo
from memlane.core.store.blocks.like import contains_pattern


@dataclass(frozen=True, slots=True)
class UserQuery:
    """Which users :meth:`Users.find_users` returns (by name order), and which page of them; a rule left
    None keeps everyone.

    ``name``: the display name, exactly. ``metadata``: pairs the user's metadata holds with an equal JSON
    value (``"1"`` and ``1`` differ). ``metadata_text``: pairs read as text, a string equal to it or a number
    or boolean whose JSON text is (never a list, an object or null). ``contains``: text the name or the
    display name holds, ignoring case (its ``%`` and ``_`` are plain characters). ``limit``, ``offset``: the
    page."""

    name: str | None = None
    metadata: Mapping[str, Any] | None = None
    limit: int = 100
    offset: int = 0
    contains: str | None = None
    metadata_text: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class UserRules:
    """One dialect's SQL for each rule of a :class:`UserQuery` (``?`` or ``%s`` placeholders), which
    :func:`user_where` joins: ``everyone`` when no rule is given; ``display_name`` takes the name;
    ``contains`` the LIKE pattern twice (name, display name); ``metadata`` the key and the value's JSON
    text; ``metadata_text`` the key ``text_keys`` times, then the text. ``key`` is how the dialect names a
    metadata key (a JSON path on SQLite)."""

    everyone: str
    display_name: str
    contains: str
    metadata: str
    metadata_text: str
    key: Callable[[str], str]
    text_keys: int


def user_where(query: UserQuery, rules: UserRules) -> tuple[str, list[object]]:
    """The WHERE clause that keeps the users ``query`` asks for, and its parameters."""
    where = [rules.everyone]
    params: list[object] = []
    if query.name is not None:
        where.append(rules.display_name)
        params.append(query.name)
    if query.contains:
        where.append(rules.contains)
        params += [contains_pattern(query.contains)] * 2
    for key, value in (query.metadata or {}).items():
        # compact, as SQLite prints a JSON value it reads; PostgreSQL parses it to jsonb either way
        where.append(rules.metadata)
        params += [rules.key(key), json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    for key, text in (query.metadata_text or {}).items():
        where.append(rules.metadata_text)
        params += [rules.key(key)] * rules.text_keys + [text]
    return " AND ".join(where), params


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

    def find_users(self, query: UserQuery) -> Page[UserInfo]:
        """The users ``query`` asks for, by name order, paged, with the total."""
        ...

    def delete_user(self, user: str) -> DeletedUser:
        """Everything of the user, API keys included, in one transaction that also raises the deletion
        epoch and records the name's tombstone (memlane.core.store.users.deletions)."""
        ...

    def deletion_epoch(self) -> int: ...

    def user_row_counts(self, user: str) -> dict[str, int]: ...
