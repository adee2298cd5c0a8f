"""No gold information at query time: renaming session ids (including LongMemEval's tell-tale ``answer_``
prefix) and changing the order sessions were stored in leaves every search's scores and ranking unchanged,
for every preset, context rescoring included."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memlane.core.embedding.minilm import MiniLMEmbedder
from memlane.core.memory import Memory
from memlane.core.retrieval import PRESETS
from memlane.core.store.sqlite import SqliteStore

SESSIONS: dict[str, list[tuple[str, str]]] = {
    "answer_4be1b6b4_1": [
        ("I adopted a golden retriever called Max last week.", "Congratulations on Max!"),
        ("Max already knows how to sit.", "Smart dog."),
    ],
    "sharegpt_a1": [("How do I boil an egg?", "Put it in boiling water for nine minutes.")],
    "answer_4be1b6b4_2": [
        ("My sister Ana moved to Lisbon in May.", "Lisbon is lovely."),
        ("She works at a bakery there.", "That sounds fun."),
        ("I might visit her in the autumn.", "Autumn in Lisbon is mild."),
    ],
    "ultrachat_77": [
        ("Write a haiku about the sea.", "Waves fold into foam..."),
        ("Now one about dogs.", "A wagging tail..."),
    ],
    "sharegpt_b2": [("What is the capital of Portugal?", "Lisbon.")],
}
QUERIES = ["What is my dog called?", "Where does my sister live and work?", "Lisbon", "sea poem"]


def _store(path: Path, minilm: MiniLMEmbedder, names: dict[str, str], order: list[str]) -> Memory:
    mem = Memory(SqliteStore(path), minilm)
    for sid in order:
        for i, (said, reply) in enumerate(SESSIONS[sid]):
            mem.add("u", [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
                    session_id=names[sid], time=f"2023-05-0{1 + i} 10:00", perspective="single")  # fmt: skip
    return mem


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_renamed_and_shuffled_sessions_give_identical_rankings(
    tmp_path: Path, minilm: MiniLMEmbedder, preset: str
) -> None:
    ids = list(SESSIONS)
    original = _store(tmp_path / "a.db", minilm, {s: s for s in ids}, ids)
    shuffled = ids[:]
    random.Random(3).shuffle(shuffled)
    assert shuffled != ids
    renamed = {s: f"s{n:03d}" for n, s in enumerate(reversed(ids))}
    other = _store(tmp_path / "b.db", minilm, renamed, shuffled)
    for query in QUERIES:
        a = original.search("u", query, k=8, mode=preset)
        b = other.search("u", query, k=8, mode=preset)
        assert [h.block.message for h in a] == [h.block.message for h in b], (preset, query)
        # float32 vectors: the same text embedded in another batch may differ in the last bits
        assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-5), (preset, query)
        assert len(a) == 8 or "keyword" in preset  # BM25 only returns blocks sharing a word
