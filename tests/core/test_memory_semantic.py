"""End to end with the real embedder: the hybrid search finds the right memory."""

from __future__ import annotations

from pathlib import Path

from memlane.core.embedding.minilm import MiniLMEmbedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore

SESSIONS = [
    ("2023/04/10 (Mon) 23:07", "I just adopted a golden retriever called Max.", "Congratulations on Max!"),
    ("2023/04/12 (Wed) 09:15", "My sister Ana lives in Lisbon now.", "Lisbon is lovely."),
    ("2023/05/01 (Mon) 18:40", "I started training for the Ghent marathon.", "Good luck with the training."),
    ("2023/06/03 (Sat) 11:00", "Work has been stressful because of the audit.", "That sounds hard."),
]


def test_semantic_search_with_real_embedder(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    mem = Memory(SqliteStore(tmp_path / "m.db"), minilm)
    for i, (when, said, reply) in enumerate(SESSIONS):
        mem.add("alice", [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
                session_id=f"s{i}", time=when, perspective="single")  # fmt: skip
    hit = mem.search("alice", "What kind of dog do I have?", k=1, mode="vector")[0]
    assert "golden retriever" in hit.block.message
    hit = mem.search("alice", "Which city is my sister in?", k=1)[0]
    assert "Lisbon" in hit.block.message
    assert hit.block.time_annotation == "9:15 am on 12 April, 2023"
    hits = mem.search("alice", "running race", k=1, before="2023-05-01")
    assert "marathon" not in hits[0].block.message
