"""The ``Users`` protocol (memlane.core.store.users) on every backend, driven through that protocol alone: what
each method's docstring promises and the Memory-level tests beside this one do not already check."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memlane.core.errors import NotFoundError
from memlane.core.memory import Memory
from memlane.core.model import KeyRecord, UserInfo
from memlane.core.store.apikeys import ApiKeys
from memlane.core.store.users import UserQuery, Users


def names(found: Sequence[UserInfo]) -> list[str]:
    return [u.name for u in found]


def test_create_user_refuses_a_taken_name_and_changes_nothing(users: Users) -> None:
    assert users.create_user("alice", display_name="Alice", metadata={"team": "red"}) is True
    assert users.create_user("alice", display_name="Other", metadata={"team": "blue"}) is False
    info = users.get_user("alice")
    assert (info.name, info.display_name, info.metadata, info.blocks, info.sessions) == (
        "alice",
        "Alice",
        {"team": "red"},
        0,
        0,
    )
    assert info.last_activity is None  # no block yet


def test_get_user_counts_sessions_and_blocks_and_reads_the_last_activity(users: Users, writer: Memory) -> None:
    writer.add_facts("alice", ["one", "two"], session_id="s1")
    last = writer.add_facts("alice", ["three"], session_id="s2").block_ids[0]
    info = users.get_user("alice")
    assert (info.blocks, info.sessions) == (3, 2)
    assert info.last_activity == writer.get("alice", last).ingest_time


def test_list_users_is_by_name(users: Users) -> None:
    for name in ("carol", "alice", "bob"):
        users.create_user(name)
    assert names(users.list_users()) == ["alice", "bob", "carol"]


def test_update_user_keeps_what_is_not_given_and_an_empty_name_clears_it(users: Users) -> None:
    users.create_user("alice", display_name="Alice", metadata={"a": 1})
    kept = users.update_user("alice", metadata={"b": 2})
    assert (kept.display_name, kept.metadata) == ("Alice", {"b": 2})  # metadata replaced, not merged
    assert users.update_user("alice").display_name == "Alice"  # None: keep
    cleared = users.update_user("alice", display_name="")
    assert cleared.display_name in (None, "") and users.get_user("alice").metadata == {"b": 2}
    with pytest.raises(NotFoundError):
        users.update_user("nobody", display_name="x")


def test_find_users_ands_every_rule_and_pages_with_the_total(users: Users) -> None:
    users.create_user("ann", display_name="Ann Lee", metadata={"team": "red", "tier": 1})
    users.create_user("ben", display_name="Ben", metadata={"team": "red", "tier": 2})
    users.create_user("cat", display_name="Ann Lee", metadata={"team": "blue", "tier": 1})
    users.create_user("dan", metadata={"team": "red", "tier": 1})
    assert names(users.find_users(UserQuery(name="Ann Lee", metadata={"team": "red"})).items) == ["ann"]
    assert names(users.find_users(UserQuery(metadata={"team": "red"}, contains="an")).items) == ["ann", "dan"]
    assert names(users.find_users(UserQuery(contains="LEE", metadata_text={"tier": "1"})).items) == ["ann", "cat"]
    page = users.find_users(UserQuery(metadata={"team": "red"}, limit=2, offset=1))
    assert names(page.items) == ["ben", "dan"] and page.total == 3
    assert (page.limit, page.offset) == (2, 1)
    beyond = users.find_users(UserQuery(limit=10, offset=10))
    assert beyond.items == [] and beyond.total == 4


def test_delete_user_counts_what_went_and_raises_the_deletion_epoch(
    users: Users, api_keys: ApiKeys, writer: Memory
) -> None:
    writer.add_facts("alice", ["a fact", "another"], session_id="s")
    writer.add_facts("bob", ["bob's"], session_id="s")
    assert api_keys.add_api_key(KeyRecord(key_id="k1", user="alice", label="laptop", created_at=1.0), "0" * 64)
    before = users.deletion_epoch()
    deleted = users.delete_user("alice")
    assert (deleted.blocks, deleted.keys) == (2, 1)
    assert users.deletion_epoch() > before
    with pytest.raises(NotFoundError):
        users.get_user("alice")
    assert names(users.list_users()) == ["bob"]
    assert set(users.user_row_counts("alice").values()) == {0}
    assert users.user_row_counts("bob")["blocks"] == 1
    with pytest.raises(NotFoundError):
        users.delete_user("alice")
    epoch = users.deletion_epoch()
    users.create_user("alice")  # the name again: a new user, the epoch unchanged
    assert users.get_user("alice").blocks == 0 and users.deletion_epoch() == epoch
