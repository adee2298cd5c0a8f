"""What a search reads, run against each backend (see conftest's params): each retriever's rank, the
session-words ranking, time windows, caches that see other connections' writes, the approximate index's status."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from store_samples import T0, add_sample, chat

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError
from memlane.core.memory import Memory
from memlane.core.ranking.session_words import session_word_ranks
from memlane.core.retrieval import PRESETS, score_fusion
from memlane.core.store.protocol import Store

StoreFactory = Callable[[], Store]


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
