"""``memlane.bench.retrieval.tune`` and ``memlane bench tune``: offline grid scoring equals real retrieval runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from bench_runs import make_data_dir, options
from click.testing import CliRunner

from memlane.bench.retrieval.history import rank
from memlane.bench.retrieval.run import open_bench, run_retrieval
from memlane.bench.retrieval.runlog import MIN_RANKING_LENGTH, read_log
from memlane.bench.retrieval.tune import (
    collect,
    evaluate,
    grid_points,
    objective_terms,
    paired_against,
    question_rankings,
    question_scores,
    run_grid,
)
from memlane.core.errors import ConfigError
from memlane.core.retrieval import PRESETS, Fusion
from memlane.interfaces.cli.app import cli, register_all

register_all()
MODES = ("hybrid", "hybrid-no-time", "hybrid-no-words", "hybrid-rank", "hybrid-rrf", "hybrid-context", "hybrid-session")


@pytest.mark.parametrize("dataset", ["longmemeval-s", "locomo"])
def test_grid_scores_equal_a_retrieval_run_question_by_question(tmp_path: Path, dataset: str) -> None:
    make_data_dir(tmp_path, time_phrases=True)
    opts = options(tmp_path, dataset, modes=MODES)
    run_retrieval(opts, tmp_path / "run", progress=False)
    records = {(r.mode, r.sample.sample_id): r for r in read_log(tmp_path / "run" / "log.jsonl").records}
    logged = {key: r.scores for key, r in records.items()}
    turns = {key: r.ranked_turn_ids for key, r in records.items()}
    if dataset == "longmemeval-s":  # the time phrases changed some rankings, so the time path is compared too
        assert any(turns[("hybrid", q)] != turns[("hybrid-no-time", q)] for _, q in records)
    compared = 0
    bm25s = {(PRESETS[m].bm25_k1, PRESETS[m].bm25_b) for m in MODES}
    assert len(bm25s) == 2  # hybrid-rrf keeps FTS5's b: candidates are collected once per BM25 setting
    for split in ("dev", "test"):
        for bm25 in bm25s:
            dev = collect(opts, split=split, bm25=bm25)
            for q in dev.questions:
                for mode in (m for m in MODES if (PRESETS[m].bm25_k1, PRESETS[m].bm25_b) == bm25):
                    assert question_rankings(dev, q, PRESETS[mode]).turn_ids == turns[(mode, q.sample.sample_id)]
                    scores = question_scores(dev, q, PRESETS[mode])
                    if scores is not None:
                        assert scores == logged[(mode, q.sample.sample_id)], (mode, q.sample.sample_id)
                        compared += 1
    assert compared >= 4 * len(MODES)


def test_the_tuners_ranking_is_memory_search_under_settings_that_move_blocks(tmp_path: Path) -> None:
    # The tuner orders candidates collected once; Memory.search reads the store as it goes. Under settings
    # whose supersession moves blocks (any two tellings an hour apart; the vector-similarity test too) both
    # must give the same ranking, question by question.
    make_data_dir(tmp_path)
    opts = options(tmp_path)
    dev = collect(opts, split="test")
    moving = replace(
        PRESETS["hybrid-supersede-similar"], supersede_similarity=0.0, supersede_terms=0.0, supersede_ratio=0.0
    )
    grid = (
        PRESETS["hybrid"],
        PRESETS["hybrid-no-supersede"],
        moving,
        replace(moving, supersede_similarity=0.2, supersede_sessions=False, supersede_once=True),
    )
    length = max(MIN_RANKING_LENGTH, max(dev.ks))
    moved = 0
    _, bench, mem = open_bench(opts)
    try:
        for q in dev.questions:
            unmoved = question_rankings(dev, q, PRESETS["hybrid-no-supersede"])
            for settings in grid:
                sample = q.sample
                found = mem.search(
                    sample.namespace, sample.question, dev.depth, mode=settings, at=sample.question_date, distinct=False
                )
                tuned = question_rankings(dev, q, settings)
                assert tuned == rank((h.block for h in found), q.index, length), (q.sample.sample_id, settings)
                moved += tuned != unmoved
    finally:
        bench.close()
    assert moved > 0  # supersession moved something: the comparison covers its path


def test_evaluate_refuses_settings_the_candidates_cannot_stand_for(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    dev = collect(options(tmp_path), split="test", limit=3)
    assert len(dev.questions) == 3 and dev.candidates == 50
    figures = evaluate(dev, PRESETS["hybrid"])
    assert figures["n"] == 3 and 0 <= figures["turn/recall_all@10"] <= 1
    with pytest.raises(ConfigError, match="hybrid search"):
        evaluate(dev, PRESETS["keyword"])
    with pytest.raises(ConfigError, match="collected 50 candidates"):
        evaluate(dev, replace(PRESETS["hybrid"], candidates=80))
    with pytest.raises(ConfigError, match="BM25 k1, b"):
        evaluate(dev, replace(PRESETS["hybrid"], bm25_b=0.75))


def test_grid_points_and_ordering(tmp_path: Path) -> None:
    points = list(grid_points(PRESETS["hybrid-rank"], {"rrf_k": [5, 60], "session_weight": [0, 0.5]}))
    assert [(p.rrf_k, p.session_weight) for p in points] == [(5, 0.0), (5, 0.5), (60, 0.0), (60, 0.5)]
    assert all(isinstance(p.rrf_k, int) and p.neighbour_weight == 0.2 for p in points)
    for fixed in ("candidates", "bm25_b"):  # they change the candidates themselves
        with pytest.raises(ConfigError, match=f"cannot tune '{fixed}'"):
            list(grid_points(PRESETS["hybrid"], {fixed: [0.5]}))
    with pytest.raises(ConfigError, match="grid point"):  # SearchSettings validates every point
        list(grid_points(PRESETS["hybrid"], {"session_weight": [-1]}))
    # The fusion rule is a grid dimension of names.
    fused = list(grid_points(PRESETS["hybrid"], {"fusion": ["rrf", "score"], "rrf_k": [10]}))
    assert [(p.fusion, p.rrf_k) for p in fused] == [(Fusion.RRF, 10), (Fusion.SCORE, 10)]
    with pytest.raises(ConfigError, match="grid point"):
        list(grid_points(PRESETS["hybrid"], {"fusion": ["borda"]}))
    with pytest.raises(ConfigError, match="takes numbers"):
        list(grid_points(PRESETS["hybrid"], {"rrf_k": ["ten"]}))
    make_data_dir(tmp_path)
    dev = collect(options(tmp_path), split="test")
    results = run_grid([dev], PRESETS["hybrid-rank"], {"rrf_k": [1, 60], "vector_weight": [0, 1]})
    assert len(results) == 4
    assert [r.objective for r in results] == sorted((r.objective for r in results), reverse=True)
    best = results[0]
    assert best.objective == pytest.approx(sum(v for k, v in best.figures["longmemeval-s"].items() if k != "n"))
    # A metric may count on one data set only.
    locomo = collect(options(tmp_path, "locomo"), split="test")
    assert objective_terms([dev, locomo], ["turn/recall_all@10", "locomo:session/recall_all@5"]) == [
        ("longmemeval-s", "turn/recall_all@10"),
        ("locomo", "turn/recall_all@10"),
        ("locomo", "session/recall_all@5"),
    ]
    with pytest.raises(ConfigError, match="not tuned here"):
        objective_terms([dev], ["locomo:turn/recall_all@10"])
    (only,) = run_grid([dev, locomo], PRESETS["hybrid"], {}, ["longmemeval-s:turn/recall_all@10"])
    assert set(only.figures["locomo"]) == {"n"}
    assert only.objective == only.figures["longmemeval-s"]["turn/recall_all@10"]


def test_paired_against_reads_the_same_scores_as_evaluate(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    dev = collect(options(tmp_path, "locomo"), split="test")
    base, other = PRESETS["hybrid"], replace(PRESETS["hybrid"], vector_weight=5.0)
    metric = "turn/recall_all@10"
    diff = paired_against(dev, base, other, metric)
    assert diff is not None
    figures = [evaluate(dev, s, [metric]) for s in (base, other)]
    assert diff.n == int(figures[0]["n"])
    assert diff.mean == pytest.approx(figures[1][metric] - figures[0][metric])
    same = paired_against(dev, base, base, metric)
    assert same is not None and (same.n, same.better, same.worse, same.mean, same.p) == (diff.n, 0, 0, 0.0, 1.0)


def test_cli_prints_the_base_preset_then_the_best_points(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    args = ["bench", "tune", "longmemeval-s", "locomo", "--set", "fusion=rrf,score", "--set", "neighbour_weight=0,0.3"]
    args += ["--embedder", "hashing", "--data-dir", str(tmp_path / "data"), "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(cli, [*args, "--split", "test", "--top", "3"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| # | objective | fusion | neighbour_weight | longmemeval-s turn/recall_all@10")
    assert {line.split(" | ")[2] for line in lines[1:]} == {"rrf", "score"}
    assert lines[1].startswith("| hybrid | ")
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| 1", "| 2", "| 3"]
    assert "4 grid points on the test split" in result.output
    # The best point is read against the base question by question, on every objective term.
    assert "Point 1 against hybrid, question by question" in result.output
    paired = [line for line in result.output.splitlines() if line.startswith("- ")]
    assert len(paired) == 4 and all(", p " in line for line in paired)
    assert paired[0].startswith("- longmemeval-s turn/recall_all@10: ")
    bad = CliRunner().invoke(cli, [*args, "--set", "mode=1"])
    assert bad.exit_code != 0 and "cannot tune 'mode'" in bad.output
