"""The store contract: behaviour every backend must show, run against each one (see conftest's params)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.memory import Memory
from memlane.core.ranking.session_words import session_word_ranks
from memlane.core.retrieval import PRESETS, score_fusion
from memlane.core.store.protocol import Store
from memlane.core.timefmt import to_epoch

StoreFactory = Callable[[], Store]
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def add_sample(mem: Memory, user: str, topic: str, n: int = 3, start: datetime = T0) -> list[str]:
    ids: list[str] = []
    for i in range(n):
        res = mem.add(
            user,
            chat(f"{user} talks about {topic} number {i}", f"reply about {topic} {i}"),
            session_id=f"s{i}",
            time=start + timedelta(days=i),
        )
        ids.extend(res.block_ids)
    return ids


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


def test_hybrid_reports_each_retrievers_rank(memory: Memory) -> None:
    add_sample(memory, "alice", "chess")
    plain = memory.search("alice", "chess number 1", k=1, mode="hybrid-rrf")[0]
    assert set(plain.ranks) == {"vector", "keyword"}
    assert plain.score == pytest.approx(sum(1 / (60 + r) for r in plain.ranks.values()))
    # The rank-fusion preset weights RRF (keyword 1, vector 0.75, k 10) and can only add context on top.
    rank = memory.search("alice", "chess number 1", k=1, mode="hybrid-rank")[0]
    assert set(rank.ranks) == {"vector", "keyword"}
    fused = sum((1.0 if name == "keyword" else 0.75) / (10 + r) for name, r in rank.ranks.items())
    assert rank.score >= fused - 1e-9
    # The default fuses score margins; without context (hybrid-fusion) its scores are exactly the weighted
    # margins of what each retriever returns alone.
    fusion = memory.search("alice", "chess number 1", k=5, mode="hybrid-fusion")
    alone = {name: memory.search("alice", "chess number 1", k=50, mode=name) for name in ("vector", "keyword")}
    refs = {h.block.id: n for n, h in enumerate(alone["vector"] + alone["keyword"])}
    weights = {"vector": 0.55, "keyword": 0.45}
    ranked = {name: [(refs[h.block.id], h.score) for h in hits] for name, hits in alone.items()}
    fused = score_fusion(ranked, weights, PRESETS["hybrid-fusion"].candidates)
    expected = {ref: score for ref, score, _ in fused}
    assert fusion and all(h.score == pytest.approx(expected[refs[h.block.id]]) for h in fusion)
    hit = memory.search("alice", "chess number 1", k=1, mode="hybrid")[0]
    assert hit.score >= expected[refs[hit.block.id]] - 1e-9  # context only adds
    heavy = memory.search("alice", "chess number 1", k=1, mode="hybrid-context")[0]
    fused = sum((1.0 if name == "keyword" else 0.5) / (5 + r) for name, r in heavy.ranks.items())
    assert heavy.score >= fused - 1e-9


def test_sessions_rank_by_what_the_people_in_them_said(memory: Memory) -> None:
    """BM25 over each session's people's words, the user's own statistics; ties share a rank, and the
    assistant's words, another user's sessions and a deleted block's words do not count."""
    said = {
        "violin": ["I play the violin", "My violin teacher is strict", "I practise the violin daily"],
        "once": ["I played the violin once", "Then I went hiking"],
        "hike": ["We went hiking in the Alps", "The hike took six hours"],
        "ask": ["Tell me about instruments"],  # the assistant talks about the violin: does not count
        "twin": ["We went hiking in the Alps", "The hike took six hours"],  # the same words as "hike"
    }
    for session, lines in said.items():
        turns = [t for line in lines for t in (line, "The violin is a lovely instrument")]
        memory.add("alice", chat(*turns), session_id=session, time=T0)
    memory.add("bob", chat("violin violin violin", "ok"), session_id="violin", time=T0)
    store = memory.store
    sessions = [*said, "unknown"]

    def by_session(query: str) -> dict[str, int]:
        return session_word_ranks(store.session_word_counts("alice", query, sessions))

    assert by_session("violin") == {"violin": 1, "once": 2}  # three mentions in three turns beat one
    assert by_session("hiking") == {"hike": 1, "twin": 1, "once": 3}  # "hiking" and "hike" both count; a tie
    asked_for = store.session_word_counts("alice", "violin", ["violin", "hike"])
    assert session_word_ranks(asked_for) == {"violin": 1}  # asked-for only
    memory.delete("alice", memory.list("alice", session_id="violin", limit=100)[0].id)
    assert by_session("violin") == {"violin": 1, "once": 2}
    assert by_session("strict teacher") == {"violin": 1}
    assert by_session("practise") == {"violin": 1}
    assert by_session("play") == {"once": 1}  # "I play the violin" was the deleted exchange
    assert memory.store.integrity_check() == []


def test_time_window(memory: Memory) -> None:
    add_sample(memory, "alice", "travel", n=5)
    before = T0 + timedelta(days=2)
    hits = memory.search("alice", "travel", k=20, before=before)
    assert hits and all(h.block.event_time < before for h in hits)
    assert {h.block.session_id for h in hits} == {"s0", "s1"}
    after_hits = memory.search("alice", "travel", k=20, mode="keyword", after=before)
    assert {h.block.session_id for h in after_hits} == {"s2", "s3", "s4"}


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


def test_delete_block(memory: Memory) -> None:
    ids = add_sample(memory, "alice", "bikes", n=2)
    memory.delete("alice", ids[0])
    with pytest.raises(NotFoundError):
        memory.get("alice", ids[0])
    assert ids[0] not in {h.block.id for h in memory.search("alice", "bikes number 0", k=10)}
    assert len(memory.list("alice")) == 3


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


@pytest.mark.parametrize("mode", ["vector", "keyword"])
def test_search_caches_see_writes_from_another_connection(store_factory: StoreFactory, mode: str) -> None:
    """Two Memory objects on one file (two processes, say): each sees the other's writes."""
    from memlane.core.store.sqlite import SqliteStore

    first = Memory(store_factory(), HashingEmbedder())
    assert isinstance(first.store, SqliteStore)
    second = Memory(SqliteStore(first.store.path), HashingEmbedder())
    add_sample(first, "alice", "violin", n=1)
    assert len(second.search("alice", "violin", k=10, mode=mode, distinct=False)) == 2
    add_sample(second, "alice", "cello", n=1)
    hits = first.search("alice", "cello number 0", k=10, mode=mode, distinct=False)
    assert len(hits) == 4 and "cello" in hits[0].block.message
    second.delete_user("alice")
    assert first.search("alice", "cello", k=10, mode=mode) == []


def test_a_shared_embedding_cache_serves_several_stores(store_factory: StoreFactory) -> None:
    emb = HashingEmbedder()
    shared = store_factory()
    first = Memory(store_factory(), emb, embedding_cache=shared)
    second = Memory(store_factory(), emb, embedding_cache=shared)
    first.add("alice", chat("a text both stores see"))
    second.add("alice", chat("a text both stores see"))
    assert emb.texts_embedded == 1
    assert len(second.search("alice", "text both", k=5, distinct=False)) == 2


def test_index_status_and_build_name_every_user(memory: Memory) -> None:
    """`memlane index status | build` on every backend: users
    below the threshold (20,000 keys by default) need no index and get none."""
    add_sample(memory, "bob", "chess", n=2)
    add_sample(memory, "alice", "gardening")
    found = [(s.user, s.keys, s.needed, s.state) for s in memory.store.index_status()]
    assert found == [("alice", 6, False, "none"), ("bob", 4, False, "none")]
    assert memory.store.build_index("alice").state == "none"
    assert [s.user for s in memory.store.index_status("bob")] == ["bob"]
    with pytest.raises(NotFoundError):
        memory.store.build_index("carol")
    with pytest.raises(NotFoundError):
        memory.store.index_status("carol")


def test_the_same_sentence_said_on_two_days_is_two_hits(memory: Memory) -> None:
    """Perspectives of one exchange fold into one hit; two exchanges never do, whatever their text."""
    said = [{"role": "user", "content": "I went to the gym today."}]
    first = memory.add("alice", said, time="2023-05-01T09:00:00Z")
    second = memory.add("alice", said, time="2023-06-01T09:00:00Z")
    hits = memory.search("alice", "When did I go to the gym?", k=5)
    assert sorted(h.block.event_time.month for h in hits) == [5, 6]
    folded = {h.block.id: set(h.other_perspectives) for h in hits}
    assert sorted(map(sorted, [{i, *o} for i, o in folded.items()])) == sorted(
        map(sorted, [set(first.block_ids), set(second.block_ids)])
    )


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
