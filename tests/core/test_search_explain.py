"""A search's explanation: each hit's retrievers (rank, own score, margin), its fused score and each
context gain add up to its score to the last bit; the margins are the fusion's; the time phrase a hit's
event time matched is named; a newer version names the older blocks it was moved above; asking for it
changes neither the hits nor their order."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Explanation, Hit
from memlane.core.retrieval import PRESETS, SearchSettings, keyword_stage, vector_stage, with_candidates
from memlane.core.store.sqlite import SqliteStore

ASKED = datetime(2024, 7, 1, 12, tzinfo=UTC)
SAID = [
    ("march", 120, "I have three bikes in the garage: a road bike, a gravel bike and a mountain bike."),
    ("march", 120, "The gravel bike needs new tyres before the spring ride."),
    ("june", 14, "I just bought my fourth bike, so now I have four bikes in the garage."),
    ("june", 14, "We rode the new bike along the canal to the bakery."),
    ("soup", 60, "We cooked a lentil soup with lots of cumin for dinner."),
    ("soup", 60, "The soup needed more salt and a squeeze of lemon."),
]


@pytest.fixture
def mem(tmp_path) -> Memory:  # type: ignore[no-untyped-def]
    memory = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder())
    for session, days_ago, text in SAID:
        messages = [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
        memory.add("alice", messages, session_id=session, time=ASKED - timedelta(days=days_ago))
    return memory


def why(hit: Hit) -> Explanation:
    assert hit.explanation is not None
    return hit.explanation


def total(e: Explanation) -> float:
    """The score as the pipeline adds it up: fused, then the gains in their order."""
    return e.fused + (((e.session_gain + e.neighbour_gain) + e.words_gain) + e.time_gain)


@pytest.mark.parametrize("preset", ["hybrid", "hybrid-rrf", "hybrid-context", "hybrid-no-words", "vector", "keyword"])
def test_the_parts_add_up_to_each_hits_score_and_change_nothing(mem: Memory, preset: str) -> None:
    query = "how many bikes do I have in the garage"
    plain = mem.search("alice", query, 5, mode=preset, at=ASKED)
    explained = mem.search("alice", query, 5, mode=preset, at=ASKED, explain=True)
    assert [(h.block.id, h.score, h.ranks) for h in explained] == [(h.block.id, h.score, h.ranks) for h in plain]
    assert all(h.explanation is None for h in plain)
    assert explained
    for hit in explained:
        e = why(hit)
        assert total(e) == hit.score  # exact: the same floats added in the same order
        assert {p.retriever: p.rank for p in e.retrievers} == hit.ranks
        if not PRESETS[preset].uses_context:
            assert (e.session_gain, e.neighbour_gain, e.words_gain, e.time_gain) == (0.0, 0.0, 0.0, 0.0)
        if preset in ("vector", "keyword"):  # a lone retriever without context keeps its own score
            assert e.retrievers[0].margin == e.retrievers[0].score == hit.score


def test_each_retrievers_score_is_its_own_and_its_margin_the_fusions(mem: Memory) -> None:
    query = "gravel bike tyres"
    settings: SearchSettings = replace(PRESETS["hybrid"], supersede=False)
    hits = mem.search("alice", query, 4, mode=settings, at=ASKED, distinct=False, explain=True)
    depth = with_candidates(settings, 4)
    own = {
        "vector": dict(vector_stage(mem.store, mem.embedder.inner, "alice", query, depth)),
        "keyword": dict(keyword_stage(mem.store, "alice", query, depth)),
    }
    weights = {"vector": settings.vector_weight, "keyword": settings.keyword_weight}
    checked = set()
    for name, scores in own.items():
        top = max(max(scores.values()), 0.0)
        floor = min(scores.values()) if len(scores) >= depth.candidates else 0.0
        ranked = sorted(scores.values(), reverse=True)
        for hit in hits:
            for part in why(hit).retrievers:
                if part.retriever == name:
                    assert part.score == ranked[part.rank - 1]  # the retriever's own score at that rank
                    assert part.margin == pytest.approx(weights[name] * (max(part.score, 0.0) - floor) / top)
                    checked.add(name)
    assert checked == {"vector", "keyword"}
    # the session gain: session_weight x the session's best fused scores among the candidates
    first = why(hits[0])
    assert first.session_gain > 0 and first.fused > 0


def test_the_time_phrase_a_hit_matched_is_named(mem: Memory) -> None:
    query = "what did I buy two weeks ago"
    hits = mem.search("alice", query, 6, mode="hybrid", at=ASKED, distinct=False, explain=True)
    by_session = {h.block.session_id: why(h) for h in hits}
    assert by_session["june"].time_phrases == ("two weeks ago",)
    assert by_session["june"].time_gain > 0
    for session in ("march", "soup"):
        if session in by_session:
            assert by_session[session].time_phrases == () and by_session[session].time_gain == 0.0
    # without a time phrase, no block gains from time
    plain = mem.search("alice", "what did I buy", 6, mode="hybrid", at=ASKED, explain=True)
    assert all(why(h).time_gain == 0.0 and why(h).time_phrases == () for h in plain)


def test_a_newer_version_names_the_older_blocks_it_was_moved_above(mem: Memory) -> None:
    settings = replace(PRESETS["hybrid"], supersede_similarity=0.3)
    query = "how many bikes do I have in the garage"
    hits = mem.search("alice", query, 3, mode=settings, at=ASKED, explain=True)
    newer, older = hits[0], hits[1]
    assert (newer.block.session_id, older.block.session_id) == ("june", "march")
    assert older.superseded_by == (newer.block.id,)
    assert why(newer).supersedes == (older.block.id,)
    assert why(older).supersedes == ()


def test_every_hit_says_which_older_blocks_it_was_moved_above_without_explain(mem: Memory) -> None:
    query = "how many bikes do I have in the garage"
    hits = mem.search("alice", query, 3, at=ASKED)
    newer, older = hits[0], hits[1]
    assert (newer.block.session_id, older.block.session_id) == ("june", "march")
    assert newer.explanation is None
    assert newer.supersedes == (older.block.id,) and older.superseded_by == (newer.block.id,)
    assert older.supersedes == () and all(h.supersedes == () for h in hits[2:])
    # the explained search says the same in both places
    explained = mem.search("alice", query, 3, at=ASKED, explain=True)
    assert [h.supersedes for h in explained] == [h.supersedes for h in hits]
    assert why(explained[0]).supersedes == newer.supersedes
