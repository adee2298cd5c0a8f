"""The ``Candidates`` protocol (memlane.core.store.candidates) on every backend, driven through that protocol
alone: what each method's docstring promises and the search tests beside this one (through Memory) do not
already check."""

from __future__ import annotations

import time
from typing import Any

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.blocks import Blocks
from memlane.core.store.candidates import Candidates
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.expiry import Expiry, TtlChange
from memlane.core.timefmt import to_epoch

T0 = 1_700_000_000.0
DAY = 86_400.0
QUERY = "kite flying"


@pytest.fixture
def kites(writer: Memory) -> list[str]:
    """Alice's five kite facts, a day apart, in two sessions; bob says the same."""
    ids = [
        writer.add_facts("alice", [f"kite flying day {i}"], session_id=f"s{i % 2}", time=T0 + i * DAY).block_ids[0]
        for i in range(5)
    ]
    writer.add_facts("bob", ["kite flying day 0"], session_id="s0", time=T0)
    return ids


def ids_of(blocks: Blocks, hits: list[tuple[int, float]]) -> set[str]:
    """The block ids of alice's candidates."""
    return {b.id for b in blocks.fetch_blocks("alice", [ref for ref, _ in hits]).values()}


def both(candidates: Candidates, k: int, **kw: Any) -> dict[str, list[tuple[int, float]]]:
    """Alice's candidates for QUERY from each retriever, with the same restrictions."""
    return {
        "vector": candidates.vector_candidates("alice", HashingEmbedder().embed([QUERY])[0], k, Scope(**kw)),
        "keyword": candidates.keyword_candidates("alice", QUERY, k, Scope(**kw)),
    }


def test_k_cuts_and_scores_come_best_first(candidates: Candidates, blocks: Blocks, kites: list[str]) -> None:
    for name, hits in both(candidates, 3).items():
        assert len(hits) == 3, name
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True), name
    assert {name: len(hits) for name, hits in both(candidates, 50).items()} == {"vector": 5, "keyword": 5}


def test_the_event_time_window_filters_and_kinds_restrict_the_pool(
    candidates: Candidates, blocks: Blocks, kites: list[str]
) -> None:
    for name, hits in both(candidates, 10, after=T0 + DAY, before=T0 + 3 * DAY).items():
        assert ids_of(blocks, hits) == set(kites[1:3]), name  # [after, before)
    for name, hits in both(candidates, 10, filters=Filters(sessions=("s1",))).items():
        assert ids_of(blocks, hits) == {kites[1], kites[3]}, name
    for name, hits in both(candidates, 10, kinds=frozenset({"summary"})).items():
        assert hits == [], name  # no extraction ran: no summary keys
    for name, hits in both(candidates, 10, kinds=frozenset({"message"})).items():
        assert len(hits) == 5, name


def test_a_block_expired_at_now_is_never_a_candidate(
    candidates: Candidates, blocks: Blocks, expiry: Expiry, kites: list[str]
) -> None:
    now = time.time()
    expiry.set_ttl("alice", TtlChange(100, block_ids=[kites[0]], now=now))
    for name, hits in both(candidates, 10, now=now + 99).items():
        assert kites[0] in ids_of(blocks, hits), name
    for name, hits in both(candidates, 10, now=now + 101).items():
        assert ids_of(blocks, hits) == set(kites[1:]), name


def test_block_positions_are_the_users_blocks_places(candidates: Candidates, writer: Memory, kites: list[str]) -> None:
    refs = [ref for ref, _ in candidates.keyword_candidates("alice", QUERY, 10)]
    bobs = [ref for ref, _ in candidates.keyword_candidates("bob", QUERY, 10)]
    positions = candidates.block_positions("alice", refs + bobs)
    assert sorted(positions) == sorted(refs)  # bob's references are not alice's
    by_id = {b.id: (b.session_id, b.exchange_index, to_epoch(b.event_time)) for b in writer.list("alice")}
    assert sorted(positions.values()) == sorted(by_id.values())


def test_session_word_counts_are_none_when_nothing_can_match(candidates: Candidates, writer: Memory) -> None:
    writer.add("alice", [{"role": "user", "content": "I fly kites"}], session_id="s1")
    counts = candidates.session_word_counts("alice", "kites", ["s1", "s9"])
    assert counts is not None and list(counts.rows) == ["s1"] and counts.n_sessions == 1
    assert candidates.session_word_counts("alice", "zeppelin", ["s1"]) is None  # no query term the user has
    assert candidates.session_word_counts("alice", "kites", []) is None
    assert candidates.session_word_counts("nobody", "kites", ["s1"]) is None
