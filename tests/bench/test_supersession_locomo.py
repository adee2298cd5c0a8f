"""A regression built from LoCoMo (shipped): "When did Caroline go to the LGBTQ support group?" asks for an
event, so supersession leaves its ranking as relevance made it; the rule before moved a later exchange
about an activist group (D10:3, July) above the exact answer (D1:3, May). The conversation is stored alone
(the benchmark's store holds all ten, which changes BM25's statistics and so the plain order a little)."""

from __future__ import annotations

from pathlib import Path

from memlane.bench.datasets.families import LOCOMO
from memlane.bench.datasets.model import Haystack
from memlane.bench.datasets.registry import load_dataset
from memlane.bench.retrieval.history import haystack_requests
from memlane.core.embedding.minilm import MiniLMEmbedder
from memlane.core.memory import Memory
from memlane.core.model import PerspectiveMode
from memlane.core.store.sqlite import SqliteStore

QUESTION = "When did Caroline go to the LGBTQ support group?"


def test_the_exact_answer_stays_first(tmp_path: Path) -> None:
    ds = load_dataset("locomo")
    sample = next(s for s in ds.samples if s.namespace == "conv-26" and s.question == QUESTION)
    assert sample.evidence_turn_ids == ("D1:3",)
    sessions = tuple(ds.histories["conv-26"])  # the whole conversation, as the benchmark stores it
    requests, _ = haystack_requests(Haystack("conv-26", sessions, ()), LOCOMO, PerspectiveMode.SPEAKERS)
    mem = Memory(SqliteStore(tmp_path / "m.db"), MiniLMEmbedder(max_tokens=128))  # the benchmark's embedder
    try:
        mem.add_many(requests)

        def order(mode: str) -> list[str]:
            hits = mem.search("conv-26", QUESTION, 6, mode=mode, distinct=False)
            return [h.block.message_ids[0] for h in hits]

        plain = order("hybrid-no-supersede")
        assert "D1:3" in plain[:3]
        assert order("hybrid") == plain  # an event question: nothing moves
        # The rule before moved the July exchange about an activist group above the exact answer.
        before = order("hybrid-supersede-similar")
        assert before.index("D1:3") > plain.index("D1:3") and before.index("D10:3") < before.index("D1:3")
    finally:
        mem.close()
