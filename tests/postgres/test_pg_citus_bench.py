"""`memlane bench citus` end to end on a small scale: every figure it promises, a large user's approximate
index read on both stores with the recall of an exact scan, and no schema left behind."""

from __future__ import annotations

import psycopg
import pytest

from memlane.bench.citus import CitusBenchSettings, run_citus_bench
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ConfigError

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def bench_schemas(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, 'memlane_bench_')")
        return {str(r[0]) for r in rows.fetchall()}


def test_bench_figures_with_a_large_user(pg_url: str, citus_url: str) -> None:
    before = bench_schemas(pg_url) | bench_schemas(citus_url)
    cfg = CitusBenchSettings(sizes=(30,), queries=8, adds=4, move_blocks=60, writers=1, ann_blocks=400)
    figures = run_citus_bench(pg_url, citus_url, cfg, embedder=HashingEmbedder())
    for name in (
        "search_ratio_30",
        "add_ratio",
        "ann_vector_ratio",
        "ann_search_ratio",
        "ann_build_s_citus",
        "move_move_s",
    ):
        assert figures[name] > 0, name
    assert figures["ann_blocks"] >= 400
    for store in ("plain", "citus"):
        assert figures[f"ann_recall_at_10_{store}"] >= 0.9
    assert figures["move_adds_lost"] == 0
    assert bench_schemas(pg_url) | bench_schemas(citus_url) <= before


def test_ann_figures_need_an_embedder(pg_url: str, citus_url: str) -> None:
    with pytest.raises(ConfigError, match="embedder"):
        run_citus_bench(pg_url, citus_url, CitusBenchSettings(ann_blocks=10))
