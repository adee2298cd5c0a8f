"""Cross-validated supersession thresholds: folds by namespace, held-out figures from points picked without
them, scores equal to a retrieval run's; and a run restricted to some question categories."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from bench_runs import make_data_dir, options

from memlane.bench.retrieval.crossval import (
    CrossValidation,
    Point,
    cross_validate,
    fold_of,
    goals,
    grid_points,
    harm,
    objective,
    prepare,
    question_scores,
)
from memlane.bench.retrieval.run import run_retrieval
from memlane.bench.retrieval.runlog import read_log
from memlane.bench.retrieval.tune import collect
from memlane.core.retrieval import PRESETS


def test_folds_and_objective() -> None:
    assert fold_of("conv-a", 5) == fold_of("conv-a", 5)
    assert {fold_of(f"q{i}", 5) for i in range(100)} == set(range(5))
    rows = [{"a": 1.0, "b": 0.0}, {"a": 0.0}, None]
    assert objective(rows, {"a": 1.0, "b": 10.0}) == 0.5  # b's mean is over the one row that has it
    # a weight named CATEGORY:metric reads that category's rows only
    assert objective(rows, {"x:a": 1.0}, ["x", "y", "x"]) == 1.0


def test_harmful_moves_past_one_in_twenty_are_charged() -> None:
    rows = [{"session/moves": 10.0, "session/moves_harmful": 1.0, "turn/moves": 20.0, "turn/moves_harmful": 1.0}]
    assert harm([*rows, None]) == pytest.approx(0.05)  # session 0.10 past 0.05; turn exactly 1 in 20, free
    assert harm([{"session/moves": 0.0}]) == 0.0  # nothing moved, nothing harmful


def test_the_goals_table_says_which_goal_is_missed() -> None:
    off = {"session/recall_any@1": 1.0, "session/latest_first": 0.0, "session/latest@1": 0.0}
    on = {**off, "session/recall_any@1": 0.0, "session/latest_first": 1.0, "session/latest@1": 1.0}
    on |= {"session/moves": 4.0, "session/moves_harmful": 1.0}
    cv = CrossValidation(
        picked=[Point(PRESETS["hybrid"])],
        held_out={"lme": [on]},
        off={"lme": [off]},
        categories={"lme": ["knowledge-update"]},
        chosen=Point(PRESETS["hybrid"]),
    )
    table = goals(cv)
    assert "| updates first | lme | knowledge-update | session/latest_first >= 0.9 | 0.000 | 1.000 | yes |" in table
    assert "| nothing else pays | lme | all | session/recall_any@1 | 1.000 | 0.000 | no |" in table
    assert "| lme | all | session: 1 of 4 | | 0.250 | no |" in table


def test_held_out_figures_come_from_points_picked_without_their_fold(tmp_path: Path) -> None:
    make_data_dir(tmp_path, questions=12)
    opts = options(tmp_path, modes=("hybrid",))
    run_retrieval(opts, tmp_path / "run", progress=False)
    logged = {r.sample.sample_id: r.scores for r in read_log(tmp_path / "run" / "log.jsonl").records}
    parts = [collect(opts, split=s) for s in ("dev", "test")]
    dev = replace(parts[0], questions=parts[0].questions + parts[1].questions)
    questions = prepare(dev, replace(PRESETS["hybrid"], supersede=False))
    # With the shipped settings, the offline path scores every question as the run did.
    for q in questions:
        assert question_scores(dev, q, PRESETS["hybrid"]) == logged[q.sample.sample_id]
    grid = {
        "signals": ("similar", "current+values"),
        "supersede_similarity": (0.0, 0.99),
        "supersede_ratio": (0.0, 0.9),
    }
    points = grid_points(PRESETS["hybrid"], grid)
    assert len(points) == 8
    off = replace(PRESETS["hybrid"], supersede=False)
    cv = cross_validate({"lme": dev}, {"lme": questions}, points, off, folds=3)
    assert len(cv.picked) == 3 and cv.chosen in points
    for q, held in zip(questions, cv.held_out["lme"], strict=True):
        point = cv.picked[fold_of(q.sample.namespace, 3)]
        assert held == question_scores(dev, q, point.settings, point.signals)
    assert cv.off["lme"] == [question_scores(dev, q, off) for q in questions]


def test_a_run_of_some_categories_asks_only_those(tmp_path: Path) -> None:
    make_data_dir(tmp_path, questions=6)
    full = run_retrieval(options(tmp_path, modes=("hybrid",)), tmp_path / "all", progress=False)
    categories = {r.sample.category for r in read_log(tmp_path / "all" / "log.jsonl").records}
    keep = sorted(categories)[0]
    part = run_retrieval(options(tmp_path, modes=("hybrid",), categories=(keep,)), tmp_path / "part", progress=False)
    records = read_log(tmp_path / "part" / "log.jsonl").records
    assert records and {r.sample.category for r in records} == {keep}
    assert part.written == len(records) < full.written


def test_reports_show_whether_the_newest_evidence_ranks_first(tmp_path: Path) -> None:
    make_data_dir(tmp_path, questions=8)
    run_retrieval(options(tmp_path, modes=("hybrid-no-supersede", "hybrid")), tmp_path / "run", progress=False)
    records = read_log(tmp_path / "run" / "log.jsonl").records
    dated = [r for r in records if r.scores and "session/latest_first" in r.scores]
    assert dated, "the synthetic questions have evidence told on several dates"
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "## Newest evidence first" in report and "| hybrid-no-supersede | overall |" in report
    # the top of the ranking and what supersession moved, per mode
    assert "## Top of the ranking" in report and "session MRR" in report
    assert "## Supersession audit" in report
    no_moves = [r for r in records if r.mode == "hybrid-no-supersede" and r.scores]
    assert no_moves and all(r.scores["session/moves"] == 0 and r.scores["turn/moves"] == 0 for r in no_moves)
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    means = results["modes"]["hybrid"]["groups"]["overall"]["means"]
    expected = sum(r.scores["session/latest_first"] for r in dated if r.mode == "hybrid") / (len(dated) / 2)
    assert means["session/latest_first"] == round(expected, 6)
