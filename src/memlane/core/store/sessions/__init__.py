"""First-class sessions of a user (docs/design/007-memory-model.md). Times are epoch seconds; ``now`` is the
caller's clock, what expiry is decided against.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memlane.core.errors import AlreadyExistsError
from memlane.core.model import MemoryBlock, Page, Session
from memlane.core.timefmt import from_epoch


@dataclass(frozen=True, slots=True)
class NewSession:
    """A session to create (:meth:`Sessions.create_session`).

    ``session_id``: its id, unique within the user; ``conversation_id``: the conversation it belongs to;
    ``started_at``: when it started (epoch seconds); ``annotations`` / ``metadata``: its labels (string
    pairs) and free JSON; ``default_ttl_s``: the TTL of its blocks that give none (None: the server's
    default, 0: never)."""

    session_id: str
    conversation_id: str
    started_at: float
    annotations: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    default_ttl_s: int | None = None

    def values(self, to_json: Callable[[Mapping[str, Any]], object]) -> tuple[object, ...]:
        """The session's values in :data:`NEW_SESSION_COLUMNS` order (the JSON ones through the dialect's
        ``to_json``)."""
        return (
            self.session_id,
            self.conversation_id,
            self.started_at,
            to_json(self.annotations),
            to_json(self.metadata),
            self.default_ttl_s,
        )


def refuse_taken(created: bool, user: str, new: NewSession, exist_ok: bool) -> None:
    """What :meth:`Sessions.create_session` does when its insert created nothing (the id is taken):
    AlreadyExistsError, unless ``exist_ok``."""
    if not created and not exist_ok:
        sid = new.session_id
        raise AlreadyExistsError("session", sid, f"session {sid!r} already exists for user {user!r}")


NEW_SESSION_COLUMNS = "session_id, conversation_id, started_at, annotations, metadata, default_ttl_s"
"""The ``sessions`` columns a :class:`NewSession` gives (:meth:`NewSession.values`); the dialect adds the
user's id and ``created_at``."""


@dataclass(frozen=True, slots=True)
class SessionChanges:
    """What :meth:`Sessions.update_session` replaces; None keeps the stored value.

    ``annotations`` / ``metadata``: the session's new labels and free JSON (each replaced whole);
    ``default_ttl_s``: the new TTL of blocks written from now on that give none (0: never)."""

    annotations: Mapping[str, str] | None = None
    metadata: Mapping[str, Any] | None = None
    default_ttl_s: int | None = None

    def columns(self, to_json: Callable[[Mapping[str, Any]], object]) -> dict[str, object]:
        """The ``sessions`` columns to set and their values (the JSON ones through the dialect's
        ``to_json``), in a fixed order; empty if nothing is given."""
        out: dict[str, object] = {}
        if self.annotations is not None:
            out["annotations"] = to_json(self.annotations)
        if self.metadata is not None:
            out["metadata"] = to_json(self.metadata)
        if self.default_ttl_s is not None:
            out["default_ttl_s"] = self.default_ttl_s
        return out


def session_of(user: str, row: Sequence[Any], blocks: int, read_json: Callable[[Any], Mapping[str, Any]]) -> Session:
    """The :class:`Session` of a ``sessions`` row (session_id, conversation_id, started_at, ended_at,
    annotations, metadata, default_ttl_s, created_at; JSON read by the dialect's ``read_json``) holding
    ``blocks`` live blocks."""
    sid, conv, started, ended, annotations, metadata, ttl, created = row
    return Session(
        user=user,
        session_id=str(sid),
        conversation_id=str(conv),
        started_at=from_epoch(float(started)),
        ended_at=None if ended is None else from_epoch(float(ended)),
        annotations={str(k): str(v) for k, v in read_json(annotations).items()},
        metadata=dict(read_json(metadata)),
        default_ttl_s=None if ttl is None else int(ttl),
        created_at=from_epoch(float(created)),
        blocks=blocks,
    )


class Sessions(Protocol):
    """First-class sessions of a user (docs/design/007-memory-model.md). Times are epoch seconds; ``now`` is the
    caller's clock, what expiry is decided against."""

    def create_session(self, user: str, new: NewSession, *, exist_ok: bool = False, now: float) -> Session:
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

    def update_session(self, user: str, session_id: str, changes: SessionChanges, *, now: float) -> Session:
        """Replace what ``changes`` gives (None: keep; ``default_ttl_s=0`` is "never expire"; the default TTL
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
