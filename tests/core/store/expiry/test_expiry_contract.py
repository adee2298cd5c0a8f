"""The ``Expiry`` protocol (memlane.core.store.expiry) on every backend, driven through that protocol alone, with
a fixed clock (``now``): what each method's docstring promises and the TTL and retention tests beside this one
(through Memory, on the real clock) do not already check."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from memlane.core.errors import NotFoundError
from memlane.core.memory import Memory
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.blocks import Blocks
from memlane.core.store.expiry import Expiry, TtlChange
from memlane.core.timefmt import from_epoch

T0 = 1_700_000_000.0
DAY = 86_400.0


def test_set_ttl_sets_the_ttl_and_the_expiry_of_what_it_names(expiry: Expiry, blocks: Blocks, writer: Memory) -> None:
    a = writer.add_facts("alice", ["a1", "a2"], session_id="a").block_ids
    b = writer.add_facts("alice", ["b1"], session_id="b").block_ids
    now = time.time()
    assert expiry.set_ttl("alice", TtlChange(600, session_id="a", now=now)) == 2
    assert [(x.ttl_s, x.expires_at) for x in map(lambda i: blocks.get_block("alice", i), a)] == [
        (600, from_epoch(now + 600))
    ] * 2
    assert blocks.get_block("alice", b[0]).expires_at is None  # another session's block: untouched
    assert expiry.set_ttl("alice", TtlChange(900, block_ids=[a[0], b[0]], now=now)) == 2
    assert blocks.get_block("alice", b[0]).expires_at == from_epoch(now + 900)
    assert blocks.get_block("alice", a[1]).ttl_s == 600
    assert expiry.set_ttl("alice", TtlChange(0, now=now)) == 3  # all, and 0: never
    assert {(x.ttl_s, x.expires_at) for x in blocks.list_blocks("alice")} == {(0, None)}


def test_set_ttl_changes_live_blocks_only_and_names_unknowns(expiry: Expiry, writer: Memory) -> None:
    ids = writer.add_facts("alice", ["a1", "a2"], session_id="a").block_ids
    past = time.time() - 100
    assert expiry.set_ttl("alice", TtlChange(1, block_ids=[ids[0]], now=past)) == 1  # ran out 99 s ago
    assert expiry.set_ttl("alice", TtlChange(60, now=time.time())) == 1  # the expired one is not brought back
    with pytest.raises(NotFoundError):
        expiry.set_ttl("nobody", TtlChange(60, now=T0))
    with pytest.raises(NotFoundError):
        expiry.set_ttl("alice", TtlChange(60, session_id="nope", now=T0))


def test_expired_users_and_the_ttl_sweep_at_a_fixed_clock(expiry: Expiry, blocks: Blocks, writer: Memory) -> None:
    ids = writer.add_facts("alice", ["a1", "a2", "a3"], session_id="a").block_ids
    writer.add_facts("bob", ["b1"], session_id="b")
    now = time.time()
    expiry.set_ttl("alice", TtlChange(60, block_ids=ids[:2], now=now))
    expiry.set_ttl("bob", TtlChange(600, now=now))
    assert expiry.expired_users(now + 59) == []
    assert expiry.expired_users(now + 61) == ["alice"]
    assert sorted(expiry.expired_users(now + 601)) == ["alice", "bob"]
    assert expiry.delete_ttl_expired("alice", now=now + 59, limit=None) == []
    dry = expiry.delete_ttl_expired("alice", now=now + 61, limit=None, dry_run=True)
    assert sorted(b.id for b in dry) == sorted(ids[:2])
    assert blocks.count_blocks("alice") == 3 and expiry.expired_users(now + 61) == ["alice"]  # nothing deleted
    first = expiry.delete_ttl_expired("alice", now=now + 61, limit=1)
    assert len(first) == 1 and first[0].id in ids[:2] and first[0].message in ("a1", "a2")
    rest = expiry.delete_ttl_expired("alice", now=now + 61, limit=None)
    assert {first[0].id, *(b.id for b in rest)} == set(ids[:2])
    assert [b.id for b in blocks.list_blocks("alice")] == [ids[2]] and expiry.expired_users(now + 61) == []


def test_retention_policies_default_and_per_user(expiry: Expiry, writer: Memory) -> None:
    writer.create_user("alice")
    assert expiry.retention_policies() == Policies(default=None, users={})
    expiry.set_retention(None, RetentionPolicy(max_age_days=30))
    expiry.set_retention("alice", RetentionPolicy(max_blocks=5))
    assert expiry.retention_policies() == Policies(
        default=RetentionPolicy(max_age_days=30), users={"alice": RetentionPolicy(max_blocks=5)}
    )
    with pytest.raises(NotFoundError):
        expiry.set_retention("ghost", RetentionPolicy(max_blocks=1))
    expiry.set_retention("alice", None)
    expiry.set_retention(None, None)
    assert expiry.retention_policies() == Policies(default=None, users={})


def test_delete_expired_by_age_or_count_oldest_first(expiry: Expiry, blocks: Blocks, writer: Memory) -> None:
    ids = [writer.add_facts("alice", [f"day {i}"], session_id="s", time=T0 + i * DAY).block_ids[0] for i in range(6)]
    dry = expiry.delete_expired("alice", before=T0 + 2 * DAY, keep=None, limit=None, dry_run=True)
    assert dry == Expired(count=2, blocks=[], remaining=4)  # a dry run only counts
    assert blocks.count_blocks("alice") == 6
    either = expiry.delete_expired("alice", before=T0 + DAY, keep=4, limit=None, dry_run=True)
    assert (either.count, either.remaining) == (2, 4)  # days 0 and 1: the count rule reaches further
    limited = expiry.delete_expired("alice", before=T0 + 3 * DAY, keep=None, limit=2)
    assert [b.id for b in limited.blocks] == ids[:2] and (limited.count, limited.remaining) == (2, 4)
    by_count = expiry.delete_expired("alice", before=None, keep=3, limit=None)
    assert [b.id for b in by_count.blocks] == [ids[2]] and by_count.remaining == 3
    assert sorted(b.event_time for b in blocks.list_blocks("alice")) == [
        from_epoch(T0) + timedelta(days=i) for i in range(3, 6)
    ]
    assert expiry.delete_expired("nobody", before=T0 + 9 * DAY, keep=1, limit=None) == Expired(0, [], 0)
