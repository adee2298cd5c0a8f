"""The ``Sessions`` protocol (memlane.core.store.sessions) on every backend, driven through that protocol alone:
what each method's docstring promises and the Memory-level tests beside this one do not already check."""

from __future__ import annotations

import time
from typing import Any

import pytest

from memlane.core.errors import AlreadyExistsError, NotFoundError, SessionEndedError
from memlane.core.memory import Memory
from memlane.core.model import Session
from memlane.core.store.sessions import NewSession, SessionChanges, Sessions
from memlane.core.store.users import Users
from memlane.core.timefmt import from_epoch

T0 = 1_700_000_000.0


def create(
    sessions: Sessions, user: str, session_id: str, started_at: float = T0, *, exist_ok: bool = False, **kw: Any
) -> Session:
    new = NewSession(session_id, kw.pop("conversation_id", "c1"), started_at, **kw)
    return sessions.create_session(user, new, exist_ok=exist_ok, now=time.time())


def test_create_session_needs_the_user_and_returns_what_it_stored(sessions: Sessions, users: Users) -> None:
    with pytest.raises(NotFoundError):
        create(sessions, "alice", "s1")
    users.create_user("alice")
    made = create(sessions, "alice", "s1", annotations={"k": "v"}, metadata={"n": [1]}, default_ttl_s=60)
    assert (made.user, made.session_id, made.conversation_id, made.started_at, made.ended_at) == (
        "alice",
        "s1",
        "c1",
        from_epoch(T0),
        None,
    )
    assert (made.annotations, made.metadata, made.default_ttl_s, made.blocks) == ({"k": "v"}, {"n": [1]}, 60, 0)
    assert sessions.get_session("alice", "s1", now=time.time()) == made


def test_a_taken_id_is_refused_or_with_exist_ok_returned_unchanged(sessions: Sessions, users: Users) -> None:
    users.create_user("alice")
    first = create(sessions, "alice", "s1", metadata={"n": 1}, default_ttl_s=60)
    with pytest.raises(AlreadyExistsError) as err:
        create(sessions, "alice", "s1")
    assert (err.value.what, err.value.name) == ("session", "s1")
    again = create(sessions, "alice", "s1", conversation_id="c2", metadata={"n": 2}, default_ttl_s=0, exist_ok=True)
    assert again == first


def test_get_session_of_an_unknown_user_or_session_is_not_found(sessions: Sessions, users: Users) -> None:
    users.create_user("alice")
    create(sessions, "alice", "s1")
    with pytest.raises(NotFoundError):
        sessions.get_session("nobody", "s1", now=time.time())
    with pytest.raises(NotFoundError):
        sessions.get_session("alice", "s2", now=time.time())


def test_list_sessions_newest_first_then_by_id_desc_paged_with_the_total(sessions: Sessions, users: Users) -> None:
    users.create_user("alice")
    for session_id, started in (("b", T0), ("a", T0), ("c", T0 + 10), ("d", T0 - 10)):
        create(sessions, "alice", session_id, started_at=started)
    now = time.time()
    page = sessions.list_sessions("alice", limit=10, offset=0, now=now)
    # Ties of start time by id, newest (greatest) first, as blocks' ties are.
    assert [s.session_id for s in page.items] == ["c", "b", "a", "d"] and page.total == 4
    middle = sessions.list_sessions("alice", limit=2, offset=1, now=now)
    assert [s.session_id for s in middle.items] == ["b", "a"] and middle.total == 4
    nobody = sessions.list_sessions("nobody", limit=10, offset=0, now=now)
    assert (nobody.items, nobody.total) == ([], 0)


def test_update_session_replaces_what_is_given_and_zero_ttl_means_never(sessions: Sessions, users: Users) -> None:
    users.create_user("alice")
    create(sessions, "alice", "s1", annotations={"a": "1"}, metadata={"m": 1}, default_ttl_s=60)
    now = time.time()
    kept = sessions.update_session("alice", "s1", SessionChanges(), now=now)
    assert (kept.annotations, kept.metadata, kept.default_ttl_s) == ({"a": "1"}, {"m": 1}, 60)
    changed = sessions.update_session("alice", "s1", SessionChanges(annotations={"b": "2"}, default_ttl_s=0), now=now)
    assert (changed.annotations, changed.metadata, changed.default_ttl_s) == ({"b": "2"}, {"m": 1}, 0)
    with pytest.raises(NotFoundError):
        sessions.update_session("alice", "nope", SessionChanges(metadata={}), now=now)


def test_end_session_records_the_end_once(sessions: Sessions, users: Users) -> None:
    users.create_user("alice")
    create(sessions, "alice", "s1")
    now = time.time()
    ended = sessions.end_session("alice", "s1", at=T0 + 5, now=now)
    assert ended.ended_at == from_epoch(T0 + 5)
    assert sessions.get_session("alice", "s1", now=now).ended_at == from_epoch(T0 + 5)
    with pytest.raises(SessionEndedError):
        sessions.end_session("alice", "s1", at=T0 + 6, now=now)
    assert sessions.get_session("alice", "s1", now=now).ended_at == from_epoch(T0 + 5)  # the first end stays
    with pytest.raises(NotFoundError):
        sessions.end_session("alice", "nope", at=T0, now=now)


def test_delete_session_returns_its_blocks_and_keeps_the_others(sessions: Sessions, writer: Memory) -> None:
    gone = writer.add_facts("alice", ["one", "two"], session_id="gone").block_ids
    kept = writer.add_facts("alice", ["three"], session_id="kept").block_ids
    writer.add_facts("bob", ["bob's"], session_id="gone")
    deleted = sessions.delete_session("alice", "gone")
    assert sorted(b.id for b in deleted) == sorted(gone) and {b.message for b in deleted} == {"one", "two"}
    now = time.time()
    with pytest.raises(NotFoundError):
        sessions.get_session("alice", "gone", now=now)
    assert sessions.get_session("alice", "kept", now=now).blocks == len(kept)
    assert sessions.get_session("bob", "gone", now=now).blocks == 1
    assert [s.session_id for s in sessions.list_sessions("alice", limit=10, offset=0, now=now).items] == ["kept"]
