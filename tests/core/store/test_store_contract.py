"""The store contract as a whole: behaviour every backend must show, run against each one (see conftest's
params): isolation between users, a deleted user leaves nothing, bad input changes nothing, the embedding
cache. Each concept's own contract is in its folder here."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from store_samples import T0, add_sample, chat

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.memory import Memory
from memlane.core.ranking.session_words import session_word_ranks
from memlane.core.store.protocol import Store
from memlane.core.timefmt import to_epoch

StoreFactory = Callable[[], Store]


def test_add_then_get_list_and_search(memory: Memory) -> None:
    ids = add_sample(memory, "alice", "gardening")
    assert len(ids) == 6  # dual mode: two perspectives per exchange
    block = memory.get("alice", ids[0])
    assert block.user == "alice" and block.session_id == "s0"
    assert block.event_time == T0 and block.time_annotation == "1:56 pm on 8 May, 2023"
    assert block.ingest_time > block.event_time
    listed = memory.list("alice")
    assert [b.id for b in listed] == ids  # event-time order
    for mode in ("vector", "keyword", "hybrid"):
        hits = memory.search("alice", "gardening number 2", k=2, mode=mode)
        assert hits and hits[0].block.session_id == "s2", mode
        assert mode in hits[0].ranks or mode == "hybrid"


def test_isolation_between_users(memory: Memory) -> None:
    a_ids = add_sample(memory, "alice", "secret recipe")
    b_ids = add_sample(memory, "bob", "secret recipe")
    for mode in ("vector", "keyword", "hybrid"):
        hits = memory.search("alice", "secret recipe", k=50, mode=mode)
        assert {h.block.user for h in hits} == {"alice"}
        assert not {h.block.id for h in hits} & set(b_ids)
    assert {b.id for b in memory.list("bob", limit=1000)} == set(b_ids)
    for bid in b_ids:
        with pytest.raises(NotFoundError):
            memory.get("alice", bid)
        with pytest.raises(NotFoundError):
            memory.delete("alice", bid)
    assert memory.get("alice", a_ids[0]).user == "alice"
    assert memory.search("carol", "secret recipe") == []
    # The internal lookups behind search answer for the asking user's blocks only.
    store = memory.store
    refs = [ref for ref, _ in store.keyword_candidates("bob", "secret recipe", 50)]
    assert len(refs) == len(b_ids)
    assert store.fetch_blocks("alice", refs) == {} and store.block_positions("alice", refs) == {}
    positions = store.block_positions("bob", refs)
    blocks = store.fetch_blocks("bob", refs)
    assert positions == {ref: (b.session_id, b.exchange_index, to_epoch(b.event_time)) for ref, b in blocks.items()}
    assert sorted(p[:2] for p in positions.values()) == sorted((f"s{i}", 0) for i in range(3) for _ in range(2))
    # Both users have sessions s0-s2; only bob said "bob": the same session ids rank for him alone.
    sessions = [f"s{i}" for i in range(3)]
    assert session_word_ranks(store.session_word_counts("alice", "bob", sessions)) == {}
    assert session_word_ranks(store.session_word_counts("bob", "bob", sessions)) == dict.fromkeys(sessions, 1)
    assert set(session_word_ranks(store.session_word_counts("alice", "alice recipe", sessions))) == set(sessions)


def test_randomized_cross_user_access_never_leaks(memory: Memory) -> None:
    rng = random.Random(3)
    owners: dict[str, str] = {}
    users = [f"user{i}" for i in range(6)]
    for u in users:
        for bid in add_sample(memory, u, "shared words here", n=2):
            owners[bid] = u
    for _ in range(200):
        u = rng.choice(users)
        bid = rng.choice(list(owners))
        if owners[bid] == u:
            assert memory.get(u, bid).id == bid
        else:
            with pytest.raises(NotFoundError):
                memory.get(u, bid)
        for h in memory.search(u, "shared words", k=50, mode=rng.choice(["vector", "keyword", "hybrid"])):
            assert owners[h.block.id] == u


def test_delete_user_leaves_nothing(memory: Memory) -> None:
    add_sample(memory, "alice", "knitting")
    add_sample(memory, "bob", "knitting")
    memory.search("alice", "knitting")  # populate the vector cache
    assert memory.delete_user("alice") == 6
    counts = memory.store.user_row_counts("alice")
    # and backend-own tables; the approximate index of large users (tests/*/test_*ann.py build one first)
    assert {"blocks", "search_keys", "key_vectors", "jobs", "users", "ann_index"} <= counts.keys()
    assert set(counts.values()) == {0}
    assert memory.store.integrity_check() == []  # the keyword index holds no rows of deleted keys
    assert memory.search("alice", "knitting") == []
    assert "alice" not in {u.name for u in memory.users()}
    assert len(memory.search("bob", "knitting", k=50, distinct=False)) == 6
    with pytest.raises(NotFoundError):
        memory.delete_user("alice")


def test_bad_input_changes_nothing(memory: Memory) -> None:
    ids = add_sample(memory, "alice", "pottery")
    before = [(b.id, b.message) for b in memory.list("alice")]
    bad_calls = [
        lambda: memory.add("alice", []),
        lambda: memory.add("alice", chat("ok", "   ")),
        lambda: memory.add("alice", chat("ok"), perspective="triple"),
        lambda: memory.add("alice", chat("ok"), time="the day after tomorrow"),
        lambda: memory.add("alice", chat("x" * 70_000)),
        lambda: memory.add("", chat("ok")),
        lambda: memory.search("alice", "", k=3),
        lambda: memory.search("alice", "q", k=0),
        lambda: memory.search("alice", "q", mode="telepathy"),
    ]
    for call in bad_calls:
        with pytest.raises(ValidationError):
            call()
    assert [(b.id, b.message) for b in memory.list("alice")] == before
    assert len(ids) == len(before)


def test_add_many_is_validated_before_anything_is_written(memory: Memory) -> None:
    from memlane.core.memory import AddRequest

    good = AddRequest("alice", chat("first add"), session_id="a")
    bad = AddRequest("alice", chat("second", ""), session_id="b")
    with pytest.raises(ValidationError) as err:
        memory.add_many([good, bad])
    assert "requests[1].messages[1].content" in str(err.value)
    assert memory.list("alice") == []


def test_embedding_cache_embeds_each_text_once(store_factory: StoreFactory) -> None:
    emb = HashingEmbedder()
    mem = Memory(store_factory(), emb)
    mem.add("alice", chat("same words", "same reply"))
    first = emb.texts_embedded
    mem.add("bob", chat("same words", "same reply"))  # same exchange text: served from the cache
    assert emb.texts_embedded == first == 1  # dual mode's two blocks share one embedding
    assert mem.embedder.hits >= 3


def test_store_refuses_another_embedder(store_factory: StoreFactory) -> None:
    from memlane.core.errors import ConfigError

    store = store_factory()
    Memory(store, HashingEmbedder(dim=64))
    with pytest.raises(ConfigError, match="hashing-64"):
        Memory(store, HashingEmbedder(dim=32))


def test_a_shared_embedding_cache_serves_several_stores(store_factory: StoreFactory) -> None:
    emb = HashingEmbedder()
    shared = store_factory()
    first = Memory(store_factory(), emb, embedding_cache=shared)
    second = Memory(store_factory(), emb, embedding_cache=shared)
    first.add("alice", chat("a text both stores see"))
    second.add("alice", chat("a text both stores see"))
    assert emb.texts_embedded == 1
    assert len(second.search("alice", "text both", k=5, distinct=False)) == 2
