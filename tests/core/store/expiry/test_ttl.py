"""Per-block TTL on every backend (docs/design/007-memory-model.md): an expired block is hidden at once and
swept, TTLs set in bulk, the server default."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from store_samples import chat

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import (
    NotFoundError,
    ValidationError,
)
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store

StoreFactory = Callable[[], Store]


def test_ttl_hides_a_block_the_moment_it_expires_and_the_sweep_deletes_it(mem: Memory) -> None:
    keep = mem.add_facts("alice", ["the lighthouse keeper paints boats"], session_id="s").block_ids[0]
    brief = mem.add_facts("alice", ["the lighthouse keeper sings opera"], session_id="s", ttl_s=1).block_ids[0]
    mem.create_session("alice", "short", default_ttl_s=1)
    via_session = mem.add("alice", chat("the lighthouse keeper fishes", "ok"), session_id="short").block_ids
    long_in_short = mem.add_facts("alice", ["the lighthouse keeper reads"], session_id="short", ttl_s=0).block_ids[0]
    b = mem.get("alice", brief)
    assert b.ttl_s == 1 and b.expires_at is not None and b.expires_at - b.ingest_time == timedelta(seconds=1)
    assert mem.get("alice", via_session[0]).ttl_s is None and mem.get("alice", via_session[0]).expires_at is not None
    assert mem.get("alice", long_in_short).expires_at is None and mem.get("alice", keep).expires_at is None
    assert mem.count("alice") == 5
    time.sleep(1.1)
    live = {keep, long_in_short}
    with pytest.raises(NotFoundError):
        mem.get("alice", brief)
    assert {b.id for b in mem.list("alice")} == live and mem.count("alice") == 2
    assert mem.get_user("alice").blocks == 2 and mem.get_session("alice", "short").blocks == 1
    assert {b.id for b in mem.browse("alice").items} == live and mem.browse("alice").total == 2
    for mode in ("vector", "keyword", "hybrid"):
        found = {h.block.id for h in mem.search("alice", "lighthouse keeper opera fishes", k=10, mode=mode)}
        assert found <= live and found, mode
    with pytest.raises(NotFoundError):
        mem.update("alice", brief, content="again")
    report = mem.apply_retention()
    assert report.users[0].ttl_expired == 3 and report.expired == 3
    assert mem.store.user_row_counts("alice")["blocks"] == 2


def test_set_ttl_in_bulk_and_the_server_default(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), default_ttl_s=7200)
    if not hasattr(mem.store, "create_session"):
        pytest.skip("this store does not implement the memory model yet")
    try:
        a = mem.add_facts("alice", ["fact a1", "fact a2"], session_id="a").block_ids
        b = mem.add_facts("alice", ["fact b1"], session_id="b").block_ids
        blocks = {x.id: x for x in mem.list("alice")}
        assert all(
            x.expires_at is not None and x.expires_at - x.ingest_time == timedelta(hours=2) for x in blocks.values()
        )
        assert mem.set_ttl("alice", 0, session_id="a") == 2
        assert all(mem.get("alice", i).expires_at is None for i in a)
        assert mem.set_ttl("alice", 60, block_ids=[b[0], "unknown-id"]) == 1
        got = mem.get("alice", b[0])
        assert got.ttl_s == 60 and got.expires_at is not None
        assert timedelta(seconds=55) < got.expires_at - datetime.now(UTC) <= timedelta(seconds=60)
        assert mem.set_ttl("alice", 0) == 3
        with pytest.raises(NotFoundError):
            mem.set_ttl("alice", 5, session_id="nope")
        with pytest.raises(ValidationError):
            mem.set_ttl("alice", -5)
        with pytest.raises(ValidationError):
            Memory(store_factory(), HashingEmbedder(), default_ttl_s=-1)
    finally:
        mem.close()
