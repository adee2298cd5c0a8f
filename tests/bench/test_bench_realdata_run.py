"""The retrieval run on the real LoCoMo file (the copy shipped with memlane): the deterministic embedder keeps
it fast; the real figures come from ``make bench``."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.bench.reports.results import load_results
from memlane.bench.retrieval.rankings import LocomoRanking, read_rankings
from memlane.bench.retrieval.run import RetrievalOptions, run_retrieval

pytestmark = pytest.mark.slow


def test_locomo_retrieval_on_real_data(tmp_path: Path) -> None:
    options = RetrievalOptions(dataset="locomo", embedder="hashing", cache_dir=tmp_path / "cache", limit=40)
    outcome = run_retrieval(options, tmp_path / "run", progress=False)
    assert outcome.ingest.ingested == 1  # conv-26 holds the first 199 questions
    assert (outcome.written, outcome.errors) == (120, 0)
    rankings = read_rankings(tmp_path / "run" / "rankings.jsonl")
    assert len(rankings) == 40
    for qa_id, r in rankings.items():
        assert qa_id.startswith("conv-26:")
        assert isinstance(r, LocomoRanking)
        assert len(r.ranked_dia_ids) >= 50
        assert len(r.ranked_session_ids) == 19  # the whole haystack: conv-26 has 19 sessions
    results = load_results(tmp_path / "run")
    assert set(results.modes) == {"vector", "keyword", "hybrid"}
    overall = results.modes["hybrid"].groups["overall"]
    assert overall.n + overall.skipped == 40  # one of them has no evidence to find
