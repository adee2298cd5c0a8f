"""First-class sessions of a user (docs/design/007-memory-model.md). Times are epoch seconds; ``now`` is the
caller's clock, what expiry is decided against.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from memlane.core.model import MemoryBlock, Page, Session


class Sessions(Protocol):
    """First-class sessions of a user (docs/design/007-memory-model.md). Times are epoch seconds; ``now`` is the
    caller's clock, what expiry is decided against."""

    def create_session(
        self,
        user: str,
        session_id: str,
        *,
        conversation_id: str,
        started_at: float,
        annotations: Mapping[str, str],
        metadata: Mapping[str, Any],
        default_ttl_s: int | None,
        exist_ok: bool = False,
        now: float,
    ) -> Session:
        """Create a session of an existing user (NotFoundError otherwise). A taken id: AlreadyExistsError,
        or with ``exist_ok`` the existing session, unchanged."""
        ...

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        """The session with its count of live blocks; NotFoundError for an unknown user or session."""
        ...

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        """The user's sessions, newest started first (then by id), paged, with the total; an unknown user
        has none."""
        ...

    def update_session(
        self,
        user: str,
        session_id: str,
        *,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
        now: float,
    ) -> Session:
        """Replace what is given (None: keep; ``default_ttl_s=0`` is "never expire"; the default TTL
        applies to blocks written from now on). SessionEndedError for an ended session, NotFoundError for
        an unknown one."""
        ...

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        """Set the session's end time; SessionEndedError if it has ended already."""
        ...

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        """Delete the session and its blocks as completely as delete_user deletes (vectors, terms, keyword
        statistics, jobs, ANN entries; the caller deletes their LLM calls and cached vectors are dropped),
        in one transaction; the blocks as they were. NotFoundError for an unknown session."""
        ...
