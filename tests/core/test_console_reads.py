"""The core reads behind the console, on every backend: ``Memory.exchange`` (a block and the other
perspectives of its exchange, the user's only) and ``Memory.list_users(contains=...)`` (bad input named)."""

from __future__ import annotations

import pytest

from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.memory import Memory

CHAT = [
    {"role": "user", "content": "I moved to Lisbon."},
    {"role": "assistant", "content": "Lovely city!"},
    {"role": "user", "content": "My cat came too."},
    {"role": "assistant", "content": "Good cat."},
]


def test_exchange_is_the_block_then_its_other_perspectives(memory: Memory) -> None:
    ids = memory.add("alice", CHAT, perspective="dual").block_ids
    memory.add("bob", CHAT, perspective="dual")
    first, mate, second, its_mate = ids
    assert [(b.id, b.perspective) for b in memory.exchange("alice", mate)] == [(mate, "assistant"), (first, "user")]
    assert [b.id for b in memory.exchange("alice", second)] == [second, its_mate]
    single = memory.add("alice", CHAT[:2], perspective="single").block_ids
    assert [b.id for b in memory.exchange("alice", single[0])] == list(single)
    with pytest.raises(NotFoundError):
        memory.exchange("bob", first)  # alice's block, asked as bob
    with pytest.raises(NotFoundError):
        memory.exchange("nobody", first)


@pytest.mark.parametrize(("value", "message"), [(5, "must be a string"), ("x" * 257, "longer than 256")])
def test_list_users_contains_is_checked(memory: Memory, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        memory.list_users(contains=value)  # type: ignore[arg-type]
    assert caught.value.where == "contains"


def test_list_users_contains(memory: Memory) -> None:
    memory.create_user("carol", display_name="Carol 50% Smith")
    memory.create_user("dave_1")
    memory.create_user("dave01")
    page = memory.list_users(contains="SMITH")
    assert [u.name for u in page.items] == ["carol"] and page.total == 1
    assert [u.name for u in memory.list_users(contains="%").items] == ["carol"]
    assert [u.name for u in memory.list_users(contains="e_").items] == ["dave_1"]
    assert memory.list_users(contains="").total == 3
