"""The ``ApiKeys`` protocol (memlane.core.store.apikeys) on every backend, driven through that protocol alone:
what each method's docstring promises and the key tests beside this one (through memlane.core.apikeys) do not
already check."""

from __future__ import annotations

import pytest

from memlane.core.errors import NotFoundError
from memlane.core.model import KeyRecord
from memlane.core.store.apikeys import ApiKeys
from memlane.core.store.users import Users

SECRET = "ab" * 32


def test_a_key_needs_its_user_and_a_free_id(api_keys: ApiKeys, users: Users) -> None:
    with pytest.raises(NotFoundError):
        api_keys.add_api_key(KeyRecord(key_id="k1", user="ghost", label="", created_at=1.0), SECRET)
    users.create_user("alice")
    users.create_user("bob")
    assert api_keys.add_api_key(KeyRecord(key_id="k1", user="alice", label="laptop", created_at=1.0), SECRET) is True
    assert api_keys.add_api_key(KeyRecord(key_id="k1", user="alice", label="other", created_at=2.0), "cd" * 32) is False
    assert (
        api_keys.add_api_key(KeyRecord(key_id="k1", user="bob", label="bob's", created_at=2.0), "cd" * 32) is False
    )  # ids are the store's, not a user's
    stored = api_keys.get_api_key("k1")
    assert stored is not None and stored.secret_sha256 == SECRET and stored.record.user == "alice"
    assert api_keys.list_api_keys("bob") == []


def test_get_reads_the_record_with_the_deletion_epoch(api_keys: ApiKeys, users: Users) -> None:
    users.create_user("alice")
    users.create_user("old")
    users.delete_user("old")  # an epoch above zero, to tell it from a default
    api_keys.add_api_key(KeyRecord(key_id="k1", user="alice", label="ci", created_at=12.5, role="read-only"), SECRET)
    stored = api_keys.get_api_key("k1")
    assert stored is not None
    assert stored.record == KeyRecord(key_id="k1", user="alice", label="ci", created_at=12.5, role="read-only")
    assert stored.epoch == users.deletion_epoch() > 0
    assert api_keys.get_api_key("nope") is None


def test_list_and_revoke_are_per_user(api_keys: ApiKeys, users: Users) -> None:
    users.create_user("alice")
    api_keys.add_api_key(KeyRecord(key_id="k2", user="alice", label="second", created_at=2.0), SECRET)
    api_keys.add_api_key(KeyRecord(key_id="k1", user="alice", label="first", created_at=1.0, role="admin"), SECRET)
    assert [(k.key_id, k.role) for k in api_keys.list_api_keys("alice")] == [("k1", "admin"), ("k2", "read-write")]
    assert api_keys.list_api_keys("nobody") == []
    assert api_keys.revoke_api_key("alice", "nope") is False
    assert api_keys.revoke_api_key("alice", "k1") is True
    assert api_keys.revoke_api_key("alice", "k1") is False  # once
    assert api_keys.get_api_key("k1") is None and [k.key_id for k in api_keys.list_api_keys("alice")] == ["k2"]
