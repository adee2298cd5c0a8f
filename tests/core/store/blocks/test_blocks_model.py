"""Blocks of the memory model on every backend (docs/design/007-memory-model.md): fact and exchange blocks,
updates in place, browse."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane.core.errors import (
    NotFoundError,
    ValidationError,
)
from memlane.core.memory import Memory
from memlane.core.model import BlockKind, Filters

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def test_facts_and_exchanges_are_blocks_of_their_kind(mem: Memory) -> None:
    facts = mem.add_facts("alice", ["Alice is allergic to peanuts", "Alice runs marathons"], session_id="f",
                          time=T0, annotations={"source": "intake"})  # fmt: skip
    pairs = mem.add_exchanges("alice", [("I adopted a dog named Rex", "Congrats!"), ("", "Reminder: vet on Monday")],
                              session_id="x", time=T0)  # fmt: skip
    assert len(facts.block_ids) == 2 and len(pairs.block_ids) == 2
    fact = mem.get("alice", facts.block_ids[0])
    assert (fact.kind, fact.message, fact.sides, fact.annotations) == (
        BlockKind.FACT, "Alice is allergic to peanuts", (), {"source": "intake"},
    )  # fmt: skip
    assert fact.event_time == T0 and fact.status == "ready"
    ex = mem.get("alice", pairs.block_ids[1])
    assert ex.kind is BlockKind.EXCHANGE and ex.sides == (("user", ""), ("assistant", "Reminder: vet on Monday"))
    assert mem.get("alice", pairs.block_ids[0]).sides == (
        ("user", "I adopted a dog named Rex"),
        ("assistant", "Congrats!"),
    )
    assert [h.block.id for h in mem.search("alice", "peanuts allergy", k=1, mode="keyword")] == [facts.block_ids[0]]
    assert [b.id for b in mem.list("alice", session_id="x")] == list(pairs.block_ids)
    kinds = Filters(kinds=frozenset({BlockKind.FACT}))
    assert {b.id for b in mem.browse("alice", kinds).items} == set(facts.block_ids)
    for bad, where in (
        (lambda: mem.add_facts("alice", "one string"), "facts"),
        (lambda: mem.add_facts("alice", ["ok", " "]), "facts[1]"),
        (lambda: mem.add_exchanges("alice", [("", "")]), "pairs[0]"),
        (lambda: mem.add_facts("alice", ["x"], annotations={"bad key": "v"}), "annotations"),
        (lambda: mem.add_facts("alice", ["x"], annotations={"k": 1}), "annotations.k"),  # type: ignore[dict-item]
        (lambda: mem.add_facts("alice", ["x"], ttl_s=-1), "ttl_s"),
        (lambda: mem.add_facts("alice", ["x"], ttl_s=True), "ttl_s"),  # type: ignore[arg-type]
        (lambda: mem.add_facts("alice", ["x"], prompt="bad id!"), "prompt"),
    ):
        with pytest.raises(ValidationError) as err:
            bad()
        assert err.value.where == where
    assert mem.count("alice") == 4  # nothing half-written


def test_update_changes_a_block_in_place(mem: Memory) -> None:
    fact = mem.add_facts("alice", ["Alice drives a red tractor"], annotations={"v": "1"}).block_ids[0]
    ex = mem.add_exchanges("alice", [("I play the oboe", "lovely")]).block_ids[0]
    other = mem.add_facts("alice", ["Alice grows pumpkins"]).block_ids[0]
    new = mem.update("alice", fact, content="Alice drives a blue bicycle", annotations={"v": "2"}, ttl_s=3600)
    assert new.id == fact and new.message == "Alice drives a blue bicycle" and new.annotations == {"v": "2"}
    assert new.updated_at is not None and new.ttl_s == 3600 and new.expires_at is not None
    assert mem.get("alice", fact) == new
    for mode in ("vector", "keyword", "hybrid"):
        hits = mem.search("alice", "tractor red", k=5, mode=mode)
        assert all("tractor" not in h.block.message for h in hits), mode
    assert [h.block.id for h in mem.search("alice", "blue bicycle", k=1, mode="keyword")] == [fact]
    ex2 = mem.update("alice", ex, sides=("I play the cello", ""))
    assert ex2.sides == (("user", "I play the cello"), ("assistant", "")) and ex2.message == "user: I play the cello"
    only_labels = mem.update("alice", other, annotations={"checked": "yes"})
    assert only_labels.message == "Alice grows pumpkins" and only_labels.annotations == {"checked": "yes"}
    for bad, where in (
        (lambda: mem.update("alice", fact, sides=("a", "b")), "sides"),
        (lambda: mem.update("alice", ex, content="text"), "content"),
        (lambda: mem.update("alice", fact, content=" "), "content"),
        (lambda: mem.update("alice", fact, annotations={"1x": "y"}), "annotations"),
    ):
        with pytest.raises(ValidationError) as err:
            bad()
        assert err.value.where == where
    with pytest.raises(NotFoundError):
        mem.update("bob", fact, content="stolen")
    assert mem.get("alice", fact).message == "Alice drives a blue bicycle"


def test_browse_pages_in_ingest_or_event_order(mem: Memory) -> None:
    ids = []
    for i in range(7):
        ids += mem.add_facts("alice", [f"note {i}"], time=T0 - timedelta(days=i), session_id=f"s{i % 2}").block_ids
    page = mem.browse("alice", limit=3, offset=2)
    assert page.total == 7 and [b.id for b in page.items] == ids[::-1][2:5]
    by_event = mem.browse("alice", order="event", limit=10)
    assert [b.id for b in by_event.items] == ids  # the first added is the newest event
    window = mem.browse("alice", Filters(sessions=("s0",)), after=T0 - timedelta(days=4), before=T0)
    assert [b.id for b in window.items] == [ids[4], ids[2]]
    with pytest.raises(ValidationError) as err:
        mem.browse("alice", order="random")
    assert err.value.where == "order"
    with pytest.raises(ValidationError) as err:
        mem.browse("alice", Filters(prompt_version=1))
    assert err.value.where == "filters.prompt_version"
