"""API keys live in the store, on every backend: made only for a user that exists, checked in constant time,
deleted with their user in the same transaction, never inherited by a later user of the same name; the
keys an earlier HTTP service kept in its own table of a SQLite store move into the store's."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from store_downgrade import HTTP_API_KEYS, downgrade_to_v6, downgrade_to_v11

from memlane.core.apikeys import ApiKeys, secret_hash
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore

StoreFactory = Callable[[], Store]


def test_keys_are_made_for_users_that_exist_and_die_with_them(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder())
    keys = ApiKeys(mem.store)
    with pytest.raises(NotFoundError, match="ghost"):
        keys.create("ghost")
    mem.create_user("alice")
    mem.create_user("bob")
    first, second, bobs = keys.create("alice", "laptop"), keys.create("alice"), keys.create("bob")
    verified = keys.verify(first.key)
    assert verified is not None and verified.record == first.record and verified.epoch == mem.deletion_epoch()
    assert keys.verify(first.key[:-1]) is None and keys.verify("mlk_" + first.record.key_id) is None
    assert [k.label for k in keys.list("alice")] == ["laptop", ""]
    assert keys.revoke("bob", first.record.key_id) is False  # not bob's to revoke
    assert keys.revoke("alice", second.record.key_id) is True and keys.verify(second.key) is None

    mem.add("alice", [{"role": "user", "content": "hello"}])
    deleted = mem.delete_user_counts("alice")
    assert (deleted.blocks, deleted.keys) == (2, 1)
    assert keys.verify(first.key) is None and keys.list("alice") == []
    assert mem.store.user_row_counts("alice")["api_keys"] == 0
    assert keys.verify(bobs.key) is not None  # another user's keys stay
    mem.create_user("alice")  # the name again: a new user, whom no old key opens
    assert keys.verify(first.key) is None and keys.list("alice") == []
    assert mem.deletion_epoch() > verified.epoch  # raised


def test_the_old_key_table_of_a_sqlite_store_moves_into_the_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    mem = Memory(SqliteStore(path), HashingEmbedder())
    mem.create_user("alice")
    kept = ApiKeys(mem.store).create("alice", "kept")
    mem.close()
    downgrade_to_v6(path)  # the keys now sit in http_api_keys, by name, as the HTTP service kept them
    with sqlite3.connect(path) as db:
        db.execute(HTTP_API_KEYS)
        # a key left by a user deleted with `memlane delete-user`: the old table kept it by mistake
        db.execute("INSERT INTO http_api_keys VALUES ('0123456789ab', 'ghost', ?, '', 0)", (secret_hash("s3cret"),))
        assert db.execute("SELECT count(*) FROM http_api_keys").fetchone() == (2,)
    store = SqliteStore(path)  # migration 7
    keys = ApiKeys(store)
    verified = keys.verify(kept.key)
    assert verified is not None and verified.record == kept.record
    assert keys.verify("mlk_0123456789ab_s3cret") is None  # the ghost's key was not moved
    tables = {r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "http_api_keys" not in tables and {"api_keys", "deletion_epoch", "user_deletions"} <= tables
    assert store.integrity_check() == []
    store.close()


def test_a_key_keeps_its_role_and_old_keys_read_and_write(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder())
    keys = ApiKeys(mem.store)
    mem.create_user("alice")
    reader, writer, admin = (
        keys.create("alice", role="read-only"),
        keys.create("alice"),
        keys.create("alice", role="admin"),
    )
    got = [keys.verify(k.key) for k in (reader, writer, admin)]
    assert [v.record.role if v else None for v in got] == ["read-only", "read-write", "admin"]
    assert sorted(k.role for k in keys.list("alice")) == ["admin", "read-only", "read-write"]
    with pytest.raises(ValidationError, match="read-only, read-write, admin") as refused:
        keys.create("alice", role="root")
    assert refused.value.where == "role"
    assert len(keys.list("alice")) == 3  # nothing half-made


def test_keys_made_before_roles_read_and_write(tmp_path: Path) -> None:
    path = tmp_path / "v11.db"
    mem = Memory(SqliteStore(path), HashingEmbedder())
    mem.create_user("alice")
    old = ApiKeys(mem.store).create("alice", role="read-only")
    mem.close()
    downgrade_to_v11(path)  # the role column is gone: the key as memlane made it before roles
    mem = Memory(SqliteStore(path), HashingEmbedder())
    verified = ApiKeys(mem.store).verify(old.key)
    assert verified is not None and verified.record.role == "read-write"
    mem.close()
