"""Blocks through Memory, run against each backend (see conftest's params): delete one, exchange indexes
across adds, counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from store_samples import T0, add_sample, chat

from memlane.core.errors import NotFoundError
from memlane.core.memory import Memory


def test_delete_block(memory: Memory) -> None:
    ids = add_sample(memory, "alice", "bikes", n=2)
    memory.delete("alice", ids[0])
    with pytest.raises(NotFoundError):
        memory.get("alice", ids[0])
    assert ids[0] not in {h.block.id for h in memory.search("alice", "bikes number 0", k=10)}
    assert len(memory.list("alice")) == 3


def test_exchange_indexes_continue_across_adds_to_a_session(memory: Memory) -> None:
    memory.add("alice", chat("one", "a", "two", "b"), session_id="s1", time=T0)
    memory.add("alice", chat("three", "c"), session_id="s1", time=T0 + timedelta(hours=1))
    memory.add("alice", chat("elsewhere", "d"), session_id="s2", time=T0)
    memory.add("alice", chat("other talk", "e"), conversation_id="c2", session_id="s1", time=T0)
    blocks = memory.list("alice")
    places = {(b.conversation_id, b.session_id, b.exchange_index, b.message.split("\n")[0]) for b in blocks}
    assert places == {
        ("default", "s1", 0, "user: one"),
        ("default", "s1", 1, "user: two"),
        ("default", "s1", 2, "user: three"),
        ("default", "s2", 0, "user: elsewhere"),
        ("c2", "s1", 0, "user: other talk"),
    }


def test_count_is_what_list_pages_through(memory: Memory) -> None:
    add_sample(memory, "alice", "gardening", n=3)
    add_sample(memory, "bob", "chess", n=1)
    assert memory.count("alice") == len(memory.list("alice")) == 6
    assert memory.count("alice", session_id="s1") == len(memory.list("alice", session_id="s1")) == 2
    assert memory.count("alice", conversation_id="other") == 0 and memory.count("nobody") == 0
