"""The filtered-search figures of ``memlane bench perf`` (memlane.bench.perffilter), on a small user."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from memlane.bench.perfcurve import exact_twin
from memlane.bench.perffilter import (
    VectorCache,
    fill_real_user,
    load_real_turns,
    measure_filtered,
    selectivity_key,
    tie_aware_recall,
)
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.protocol import Vectors
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.cli.app import cli, register_all


def test_tie_aware_recall_counts_equal_scores_and_misses() -> None:
    want = [(1, 0.9), (2, 0.8), (3, 0.7)]
    assert tie_aware_recall([(1, 0.9), (2, 0.8), (3, 0.7)], want, k=3) == 1.0
    # another block with the k-th score (a repeat of the same text) is as good as the exact one
    assert tie_aware_recall([(1, 0.9), (2, 0.8), (9, 0.7)], want, k=3) == 1.0
    assert tie_aware_recall([(1, 0.9), (2, 0.8), (9, 0.5)], want, k=3) == pytest.approx(2 / 3)
    assert tie_aware_recall([], [], k=3) == 1.0


def test_locomo_turns_repeat_a_year_apart_and_queries_are_held_out() -> None:
    turns = load_real_turns(None, 12_000, 20, seed=3)
    assert turns.source == "locomo"
    assert len(turns.exchanges) == 12_000 and len(turns.queries) == 20
    texts = [t for t, _ in turns.exchanges]
    distinct = set(texts)
    assert len(distinct) < len(texts)  # LoCoMo is smaller: repeated
    first: dict[str, datetime] = {}
    for text, when in turns.exchanges:
        if text in first and when != first[text]:
            assert (when - first[text]).days % 365 == 0
            break
        first.setdefault(text, when)
    else:
        pytest.fail("no repeated exchange moved by a year")
    stored_users = {t.split("\n", 1)[0].split(": ", 1)[-1] for t in distinct}
    assert not set(turns.queries) & stored_users
    # Every conversation's sessions, though each numbers its own from session_1: all of LoCoMo's
    # exchanges but the held-out ones, each repeated about as often.
    every = load_real_turns(None, 100_000, 20, seed=3)
    counts = Counter(t for t, _ in every.exchanges)
    assert len(counts) > 2_500 and max(counts.values()) <= min(counts.values()) + 1


def test_the_vector_cache_embeds_each_text_once(tmp_path: Path) -> None:
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed(self, texts: Sequence[str]) -> Vectors:
            calls.append(len(texts))
            return super().embed(texts)

    emb = Counting()
    cache = VectorCache(tmp_path / "perf" / "vectors.sqlite")
    first = cache.embed(emb, "m", ["a b", "c d", "a b"])
    assert sum(calls) == 2
    again = cache.embed(emb, "m", ["c d", "a b"])
    assert sum(calls) == 2  # nothing embedded anew
    np.testing.assert_allclose(again[1], first[0])
    cache.close()


def test_filtered_figures_on_a_user_with_the_index_on(tmp_path: Path) -> None:
    emb = HashingEmbedder()
    turns = load_real_turns(None, 600, 6, seed=1)
    store = SqliteStore(tmp_path / "s.db", ann=AnnSettings(threshold=100, background=False))
    mem = Memory(store, emb)
    vectors = np.asarray(emb.embed([t for t, _ in turns.exchanges]), dtype=np.float32)
    fill_real_user(store, "u", turns, vectors, mem.embedder.model_id, (0.05, 0.5), seed=2)
    share = [b.annotations[selectivity_key(0)] for b in store.list_blocks("u", limit=1000)]
    assert len(share) == 600 and 0 < share.count("in") < 100
    exact = exact_twin(store)
    out = measure_filtered(mem, exact, "u", turns.queries, "1k", (0.05, 0.5), real=True)
    for sel in ("0.05", "0.5"):
        assert out[f"filtered_recall_at_10_real_1k_{sel}"] == pytest.approx(1.0)
        assert out[f"filtered_search_p50_ms_1k_{sel}"] > 0
        assert out[f"filtered_vs_unfiltered_1k_{sel}"] > 0
    # every filtered hit carries the filter's annotation
    hits = mem.search("u", turns.queries[0], 10, filters=Filters(annotations={selectivity_key(0): "in"}))
    assert hits and all(h.block.annotations[selectivity_key(0)] == "in" for h in hits)
    exact.close()
    mem.close()


@pytest.mark.parametrize("value", ["0.1,x", "0", "1.5"])
def test_a_bad_selectivity_exits_2_naming_the_option(value: str) -> None:
    register_all()
    result = CliRunner().invoke(cli, ["bench", "perf", "--filter-selectivity", value])
    assert result.exit_code == 2
    assert "--filter-selectivity" in result.output
