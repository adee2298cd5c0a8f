"""The search pipeline's steps (collect, then order: rank and supersede) are what Memory.search runs and what
bench tune re-orders: the same order and scores every way, and the same as the pipeline written out step by step
over the store's retrievers, fusion and rescoring."""

from __future__ import annotations

import warnings
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.model import SearchMode
from memlane.core.ranking.session_words import session_word_ranks
from memlane.core.retrieval import (
    PRESETS,
    Candidates,
    FromStore,
    Known,
    Position,
    Scored,
    SearchSettings,
    Versions,
    collect,
    fuse,
    order,
    rank,
    rescore,
    with_candidates,
)
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.sqlite import SqliteStore
from memlane.core.time_phrases import time_windows
from memlane.core.timefmt import to_epoch

ASKED = datetime(2024, 3, 1, 12, tzinfo=UTC)
QUERIES = (
    "what did Ana bake two weeks ago",
    "Lisbon bakery bread",
    "where does the violin teacher live",
    "hiking in the mountains last month",
    "tea",
)
SESSIONS = (
    ("s1", 40, ["Ana moved to Lisbon.", "Ana works at a bakery in Lisbon.", "She bakes sourdough bread."]),
    ("s2", 14, ["I baked a lemon cake with Ana.", "The cake was for my violin teacher.", "He lives in Porto."]),
    ("s3", 30, ["We went hiking in the mountains.", "The trail was steep.", "I drank green tea at the top."]),
    ("s4", 3, ["My violin lesson moved to Friday.", "Ana came to listen.", "We had tea and bread after."]),
    ("s5", 60, ["Bread again: rye this time.", "Lisbon trip planned for May.", "Tea with the teacher."]),
)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    memory = Memory(SqliteStore(tmp_path_factory.mktemp("pipeline") / "d.db"), HashingEmbedder())
    for session, days_ago, turns in SESSIONS:
        messages = []
        for said in turns:
            messages += [{"role": "user", "content": said}, {"role": "assistant", "content": f"Noted: {said}"}]
        memory.add("alice", messages, session_id=session, time=ASKED - timedelta(days=days_ago))
    memory.add("bob", [{"role": "user", "content": "Ana bakes bread in Lisbon."}], session_id="s1")
    return memory


def step_by_step(mem: Memory, query: str, settings: SearchSettings) -> Scored:
    """The pipeline written out over the store's primitives, as Memory.search ran it before collect and rank."""
    store, kinds = mem.store, settings.key_kinds()
    rankings = {}
    if settings.mode in (SearchMode.VECTOR, SearchMode.HYBRID):
        qvec = mem.embedder.inner.embed([query])[0]
        rankings["vector"] = store.vector_candidates("alice", qvec, settings.candidates, Scope(kinds=kinds))
    if settings.mode in (SearchMode.KEYWORD, SearchMode.HYBRID):
        rankings["keyword"] = store.keyword_candidates(
            "alice", query, settings.candidates, Scope(kinds=kinds), k1=settings.bm25_k1, b=settings.bm25_b
        )
    scored = fuse(rankings, settings)
    if not settings.uses_context:
        return scored
    located = store.block_positions("alice", [ref for ref, _, _ in scored])
    positions = {ref: Position(*where) for ref, where in located.items()}
    sessions = sorted({p.session for p in positions.values()})
    words = session_word_ranks(store.session_word_counts("alice", query, sessions)) if settings.uses_words else {}
    windows = time_windows(query, ASKED, tolerance=settings.time_tolerance) if settings.uses_time else ()
    rescored = rescore({ref: s for ref, s, _ in scored}, positions, settings, words, windows)
    return sorted(((ref, rescored[ref], r) for ref, _, r in scored if ref in positions), key=lambda h: -h[1])


def ordered(mem: Memory, found: Candidates, settings: SearchSettings, versions: Versions | None = None) -> Scored:
    """Rank, then supersede, as Memory.search does with ``at`` given (supersession reading the store unless
    ``versions`` are given)."""
    if versions is None:
        versions = FromStore(mem.store, mem.embedder.cache, mem.embedder.model_id, "alice")
    return order(found, settings, versions, asked=ASKED, until=to_epoch(ASKED)).ranked


def as_hits(mem: Memory, ranked: Scored) -> list[tuple[str, float, dict[str, int]]]:
    blocks = mem.store.fetch_blocks("alice", [ref for ref, _, _ in ranked])
    return [(blocks[ref].id, score, ranks) for ref, score, ranks in ranked]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("query", QUERIES)
def test_collect_rank_equal_memory_search_and_the_steps_written_out(mem: Memory, preset: str, query: str) -> None:
    k = 8
    settings = with_candidates(PRESETS[preset], k)
    found = collect(mem.store, mem.embedder.inner, "alice", query, settings)
    ranked = rank(found, settings, asked=ASKED)
    expected = step_by_step(mem, query, settings)
    assert [(ref, score) for ref, score, _ in ranked] == [(ref, score) for ref, score, _ in expected]
    ranked = ordered(mem, found, settings)
    searched = mem.search("alice", query, k, mode=preset, at=ASKED, distinct=False)
    assert [(h.block.id, h.score, h.ranks) for h in searched] == as_hits(mem, ranked[:k])
    assert len(searched) == min(k, len(ranked)) > 0
    # distinct: the same order, each exchange once (dual mode: two blocks per exchange among 2k candidates)
    wide = with_candidates(PRESETS[preset], 2 * k)
    wide_order = ordered(mem, collect(mem.store, mem.embedder.inner, "alice", query, wide), wide)
    first: dict[str, tuple[str, float]] = {}
    for block_id, score, _ in as_hits(mem, wide_order):
        first.setdefault(mem.store.get_block("alice", block_id).message, (block_id, score))
    distinct = mem.search("alice", query, k, mode=preset, at=ASKED)
    assert [(h.block.id, h.score) for h in distinct] == list(first.values())[:k]


def test_context_gains_change_the_order_somewhere(mem: Memory) -> None:
    # Guards the comparisons above against settings that all rank alike: context moves blocks.
    plain, full = PRESETS["hybrid-fusion"], PRESETS["hybrid"]
    moved = 0
    for query in QUERIES:
        found = collect(mem.store, mem.embedder.inner, "alice", query, full)
        a = [ref for ref, _, _ in rank(found, plain, asked=ASKED)]
        b = [ref for ref, _, _ in rank(found, full, asked=ASKED)]
        moved += a != b
    assert moved > 0


# Supersession settings that move blocks on these queries (any two tellings by one speaker an hour apart,
# whatever they say), and the similarity test that reads the blocks' vectors.
MOVING = replace(
    PRESETS["hybrid-supersede-similar"], supersede_similarity=0.0, supersede_terms=0.0, supersede_ratio=0.0
)
SIMILAR = replace(MOVING, supersede_similarity=0.2, supersede_sessions=False, supersede_once=True)


@pytest.mark.parametrize("query", QUERIES)
def test_candidates_collected_once_order_as_memory_search_under_every_setting(mem: Memory, query: str) -> None:
    # What bench tune does: collect once with every context and what supersession reads of every candidate,
    # then order under each grid point.
    depth = 10
    base = with_candidates(SearchSettings(), depth)
    found = collect(mem.store, mem.embedder.inner, "alice", query, base, all_context=True)
    assert found.positions and set(found.rankings) == {"vector", "keyword"}
    known = Known.of(mem.store, mem.embedder.cache, mem.embedder.model_id, "alice", found)
    grid = {**PRESETS, "moving": MOVING, "similar": SIMILAR}
    for name, preset in grid.items():
        if preset.mode is not SearchMode.HYBRID or not preset.fact_keys or preset.bm25_b != base.bm25_b:
            continue  # these change the candidates themselves: tune refuses them
        settings = with_candidates(preset, depth)
        tuned = ordered(mem, found, settings, known)[:depth]
        searched = mem.search("alice", query, depth, mode=preset, at=ASKED, distinct=False)
        assert as_hits(mem, tuned) == [(h.block.id, h.score, h.ranks) for h in searched], name


def test_the_sweeps_settings_move_blocks(mem: Memory) -> None:
    # Guards the comparison above against supersession settings that leave every ranking as it was.
    for settings in (MOVING, SIMILAR):
        moved = 0
        for query in QUERIES:
            found = collect(mem.store, mem.embedder.inner, "alice", query, settings)
            moved += ordered(mem, found, settings) != rank(found, settings, asked=ASKED)
        assert moved > 0


def test_collect_reads_context_only_when_the_settings_use_it(mem: Memory) -> None:
    plain = collect(mem.store, mem.embedder.inner, "alice", "Ana bread", PRESETS["hybrid-fusion"])
    assert plain.positions == {} and plain.word_ranks == {}
    words = collect(mem.store, mem.embedder.inner, "alice", "Ana bread", PRESETS["hybrid"])
    assert words.positions and words.word_ranks
    assert set(words.word_ranks) <= {p.session for p in words.positions.values()}
    with pytest.raises(ValidationError, match="all_context") as caught:
        rank(plain, PRESETS["hybrid"], asked=ASKED)  # would drop every candidate for want of a place
    assert caught.value.where == "settings"
    no_words = collect(mem.store, mem.embedder.inner, "alice", "Ana bread", PRESETS["hybrid-no-words"])
    assert no_words.positions and no_words.word_ranks == {}
    with pytest.raises(ValidationError, match="context"):
        rank(no_words, PRESETS["hybrid"], asked=ASKED)
    keyword = collect(mem.store, mem.embedder.inner, "alice", "Ana bread", PRESETS["keyword"])
    assert set(keyword.rankings) == {"keyword"}
    # positions carry the event times the time gain reads
    some = next(iter(words.positions.values()))
    assert some.time in {to_epoch(ASKED - timedelta(days=d)) for _, d, _ in SESSIONS}


def test_get_memory_is_a_deprecated_alias_of_search(mem: Memory) -> None:
    with pytest.warns(DeprecationWarning, match="Memory.search"):
        old = mem.get_memory("alice", "Ana bread", 3, at=ASKED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = mem.search("alice", "Ana bread", 3, at=ASKED)
    assert [(h.block.id, h.score) for h in old] == [(h.block.id, h.score) for h in new]
