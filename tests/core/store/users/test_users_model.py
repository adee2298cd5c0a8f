"""Users of the memory model on every backend (docs/design/007-memory-model.md): names, display names and
metadata, found by them."""

from __future__ import annotations

import pytest

from memlane.core.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    ValidationError,
)
from memlane.core.memory import Memory


def test_users_have_names_and_metadata_and_are_found_by_them(mem: Memory) -> None:
    assert mem.create_user("alice", display_name="Alice A.", metadata={"team": "red", "level": 3})
    assert mem.create_user("bob", display_name="Bob", metadata={"team": "red", "level": "3"})
    mem.create_user("carol", metadata={"team": "blue"})
    assert not mem.create_user("alice", display_name="someone else")  # exists: nothing changed
    with pytest.raises(AlreadyExistsError) as err:
        mem.create_user("alice", exist_ok=False)
    assert err.value.what == "user" and err.value.name == "alice" and isinstance(err.value, ConflictError)
    info = mem.get_user("alice")
    assert (info.display_name, info.metadata) == ("Alice A.", {"team": "red", "level": 3})
    assert [u.name for u in mem.list_users(metadata={"team": "red"}).items] == ["alice", "bob"]
    # Equal JSON values: the number 3 is not the string "3"; pairs are ANDed.
    assert [u.name for u in mem.list_users(metadata={"team": "red", "level": 3}).items] == ["alice"]
    assert [u.name for u in mem.list_users(metadata={"level": "3"}).items] == ["bob"]
    assert [u.name for u in mem.list_users(name="Bob").items] == ["bob"]
    # Values read as text (the Agent Memory API's filter): a string as itself, a number or a boolean as its
    # JSON text; a list, an object or null never matches.
    assert [u.name for u in mem.list_users(metadata_text={"level": "3"}).items] == ["alice", "bob"]
    assert [u.name for u in mem.list_users(metadata_text={"level": "3", "team": "red"}, limit=1).items] == ["alice"]
    assert mem.list_users(metadata_text={"level": "3.0"}).total == 0
    assert mem.list_users(name="bob").total == 0  # exact display name
    page = mem.list_users(limit=2, offset=1)
    assert page.total == 3 and [u.name for u in page.items] == ["bob", "carol"]
    updated = mem.update_user("alice", metadata={"team": "green"})
    assert updated.display_name == "Alice A." and updated.metadata == {"team": "green"}
    assert mem.update_user("alice", display_name=None).display_name is None
    with pytest.raises(NotFoundError):
        mem.get_user("nobody")
    with pytest.raises(ValidationError) as bad:
        mem.create_user("dave", metadata={"x": float("nan")})
    assert bad.value.where == "metadata"
    assert "dave" not in {u.name for u in mem.users()}


def test_metadata_read_as_text_matches_numbers_and_booleans_by_their_json_text(mem: Memory) -> None:
    odd = {"n": 2.5, "on": True, "off": False, "tags": ["x"], "obj": {"a": 1}, "none": None, "big": 10**12}
    mem.create_user("a", metadata=odd)
    mem.create_user("b", metadata={"n": "2.5", "on": "true", "tags": "['x']", "none": "None"})
    for pairs, found in [
        ({"n": "2.5"}, ["a", "b"]),
        ({"on": "true"}, ["a", "b"]),
        ({"off": "false"}, ["a"]),
        ({"big": "1000000000000"}, ["a"]),
        ({"tags": "['x']"}, ["b"]),  # a list never matches; the string does
        ({"obj": '{"a": 1}'}, []),
        ({"none": "None"}, ["b"]),
        ({"none": "null"}, []),
        ({"missing": ""}, []),
    ]:
        page = mem.list_users(metadata_text=pairs)
        assert [u.name for u in page.items] == found and page.total == len(found), pairs
    with pytest.raises(ValidationError, match="metadata_text"):
        mem.list_users(metadata_text={"n": 2.5})  # type: ignore[dict-item]
