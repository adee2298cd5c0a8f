"""The narrow protocols are what code that needs one concept depends on: both backends satisfy every one of them
(and their composition, ``Store``), and a fake that implements only ``Sessions`` satisfies ``Sessions`` and not
``Store``. This module is type-checked with the sources (``[tool.mypy] files`` in pyproject.toml, ``make
typecheck``): the functions below are the check, and mypy fails if a backend or the fake stops matching; the
tests run the fake through code typed against the protocol."""

from __future__ import annotations

import time
from dataclasses import replace

from memlane.core.errors import AlreadyExistsError, NotFoundError, SessionEndedError
from memlane.core.model import MemoryBlock, Page, Session
from memlane.core.store.apikeys import ApiKeys
from memlane.core.store.blocks import Blocks
from memlane.core.store.candidates import Candidates
from memlane.core.store.expiry import Expiry
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.prompts import Prompts
from memlane.core.store.protocol import Store, Upkeep, VectorCache
from memlane.core.store.queue import Queue
from memlane.core.store.sessions import NewSession, SessionChanges, Sessions
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.users import Users
from memlane.core.timefmt import from_epoch

Every = tuple[Users, Sessions, Blocks, Prompts, Queue, Expiry, ApiKeys, Candidates, VectorCache, Upkeep, Store]


def _sqlite_is_every_concept(s: SqliteStore) -> Every:
    return (s, s, s, s, s, s, s, s, s, s, s)


def _postgres_is_every_concept(s: PostgresStore) -> Every:
    return (s, s, s, s, s, s, s, s, s, s, s)


class FakeSessions:
    """Sessions in a dict, for code that needs sessions only: no users table, no blocks."""

    def __init__(self, users: set[str]) -> None:
        self.users = users
        self.sessions: dict[tuple[str, str], Session] = {}

    def _get(self, user: str, session_id: str) -> Session:
        found = self.sessions.get((user, session_id))
        if found is None:
            raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
        return found

    def create_session(self, user: str, new: NewSession, *, exist_ok: bool = False, now: float) -> Session:
        if user not in self.users:
            raise NotFoundError(f"user {user!r} not found")
        if (user, new.session_id) in self.sessions:
            if not exist_ok:
                raise AlreadyExistsError("session", new.session_id)
            return self.sessions[user, new.session_id]
        made = Session(
            user=user,
            session_id=new.session_id,
            conversation_id=new.conversation_id,
            started_at=from_epoch(new.started_at),
            ended_at=None,
            annotations=dict(new.annotations),
            metadata=dict(new.metadata),
            default_ttl_s=new.default_ttl_s,
            created_at=from_epoch(now),
        )
        self.sessions[user, new.session_id] = made
        return made

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        return self._get(user, session_id)

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        mine = sorted(
            (s for (u, _), s in self.sessions.items() if u == user),
            key=lambda s: (s.started_at, s.session_id),
            reverse=True,
        )
        return Page(items=mine[offset : offset + limit], total=len(mine), limit=limit, offset=offset)

    def update_session(self, user: str, session_id: str, changes: SessionChanges, *, now: float) -> Session:
        found = self._get(user, session_id)
        if found.ended:
            raise SessionEndedError(user, session_id)
        changed = replace(
            found,
            annotations=found.annotations if changes.annotations is None else dict(changes.annotations),
            metadata=found.metadata if changes.metadata is None else dict(changes.metadata),
            default_ttl_s=found.default_ttl_s if changes.default_ttl_s is None else changes.default_ttl_s,
        )
        self.sessions[user, session_id] = changed
        return changed

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        found = self._get(user, session_id)
        if found.ended:
            raise SessionEndedError(user, session_id)
        self.sessions[user, session_id] = replace(found, ended_at=from_epoch(at))
        return self.sessions[user, session_id]

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        self._get(user, session_id)
        del self.sessions[user, session_id]
        return []


def _fake_is_sessions(fake: FakeSessions) -> Sessions:
    return fake


def _fake_is_not_a_store(fake: FakeSessions) -> Store:
    # The ignore is the check: with warn_unused_ignores, mypy fails here if the fake ever passed for a Store.
    return fake  # type: ignore[return-value]


def open_sessions(sessions: Sessions, user: str) -> list[str]:
    """Code that needs only sessions: the ids of a user's sessions not ended yet, newest first."""
    page = sessions.list_sessions(user, limit=100, offset=0, now=time.time())
    return [s.session_id for s in page.items if not s.ended]


def test_code_typed_against_sessions_runs_on_the_fake() -> None:
    fake = FakeSessions({"alice"})
    for i, session_id in enumerate(("s1", "s2", "s3")):
        fake.create_session("alice", NewSession(session_id, "c", 1_700_000_000.0 + i), now=time.time())
    fake.end_session("alice", "s2", at=1_700_000_100.0, now=time.time())
    assert open_sessions(_fake_is_sessions(fake), "alice") == ["s3", "s1"]
    assert open_sessions(fake, "bob") == []
