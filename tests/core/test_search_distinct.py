"""A search returns each exchange once (its best perspective, the others' ids beside it), and says what
its scores are."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.retrieval import PRESETS, SCORE_KINDS, score_kind
from memlane.core.store.sqlite import SqliteStore


def chat(said: str, reply: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    return Memory(SqliteStore(tmp_path / "d.db"), HashingEmbedder())


@pytest.mark.parametrize("perspective", ["dual", "speakers"])
def test_k_means_k_distinct_exchanges(mem: Memory, perspective: str) -> None:
    messages = [
        {"role": "user", "content": "My sister Ana moved to Lisbon."},
        {"role": "assistant", "content": "Lisbon is lovely."},
        {"role": "user", "content": "Ana works at a bakery in Lisbon."},
        {"role": "assistant", "content": "Fresh bread every day!"},
        {"role": "user", "content": "Ana visits Porto in June."},
        {"role": "assistant", "content": "Porto is lovely too."},
    ]
    if perspective == "speakers":
        messages = [{"speaker": "Ana" if i % 2 else "Bo", "content": m["content"]} for i, m in enumerate(messages)]
    added = mem.add("alice", messages, session_id="s1", perspective=perspective)
    assert len(added.block_ids) == 6
    hits = mem.search("alice", "Ana Lisbon Porto", k=3)
    assert len(hits) == 3
    assert len({h.block.message for h in hits}) == 3  # three different exchanges
    returned = {h.block.id for h in hits} | {o for h in hits for o in h.other_perspectives}
    assert returned == set(added.block_ids)  # every block is either a hit or folded into one
    assert all(len(h.other_perspectives) == 1 for h in hits)
    # Per block, as the benchmarks score: both perspectives of the best exchanges.
    blocks = mem.search("alice", "Ana Lisbon Porto", k=3, distinct=False)
    assert len(blocks) == 3 and len({h.block.message for h in blocks}) == 2
    assert all(h.other_perspectives == () for h in blocks)
    assert [h.block.message for h in hits[:1]] == [blocks[0].block.message]


def test_exchanges_of_separate_adds_to_one_session_are_not_folded(mem: Memory) -> None:
    mem.add("alice", chat("I like green tea.", "Noted."), session_id="s1", perspective="single")
    mem.add("alice", chat("I like black tea too.", "Noted."), session_id="s1", perspective="single")
    hits = mem.search("alice", "tea", k=5)
    assert len(hits) == 2 and all(h.other_perspectives == () for h in hits)


def test_a_store_written_when_every_add_restarted_at_0_still_folds_right(mem: Memory) -> None:
    """Stores written before exchange indexes continued across adds hold two adds' exchanges at the same
    place (session, index 0): the add that wrote a block (its ingest time) tells them apart, the same text
    or not, and the perspectives of each still fold."""
    said = chat("I went to the gym today.", "Good for you!")
    first = mem.add("alice", said, time="2023-05-01T09:00:00Z")
    second = mem.add("alice", said, time="2023-06-01T09:00:00Z")
    assert isinstance(mem.store, SqliteStore)
    with mem.store.transaction() as conn:
        conn.execute("UPDATE blocks SET exchange_index = 0")  # as the earlier numbering left them
    assert {b.exchange_index for b in mem.list("alice")} == {0}
    hits = mem.search("alice", "gym", k=5)
    assert sorted(h.block.event_time.month for h in hits) == [5, 6]
    assert sorted(sorted([h.block.id, *h.other_perspectives]) for h in hits) == sorted(
        [sorted(first.block_ids), sorted(second.block_ids)]
    )


def test_many_duplicates_still_fill_k(mem: Memory) -> None:
    for i in range(30):
        mem.add("alice", chat(f"Note {i} about the garden.", f"Garden note {i} kept."), session_id=f"s{i}")
    hits = mem.search("alice", "garden note", k=25, mode="vector")
    assert len(hits) == 25 and len({h.block.message for h in hits}) == 25


def test_score_kinds(mem: Memory) -> None:
    mem.add("alice", chat("The vault code is 4711.", "Got it."))
    expected = {"vector": "cosine", "keyword": "bm25", "hybrid": "fusion", "hybrid-rrf": "rrf"}
    for mode, kind in expected.items():
        [hit] = mem.search("alice", "vault code", k=1, mode=mode)
        assert hit.score_kind == kind == score_kind(PRESETS[mode])
    [cos] = mem.search("alice", "vault code", k=1, mode="vector")
    assert -1.0 <= cos.score <= 1.0
    assert set(SCORE_KINDS) == {score_kind(s) for s in PRESETS.values()}
    assert all(math.isfinite(h.score) for h in mem.search("alice", "vault", k=3))
