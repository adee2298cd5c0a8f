"""Aggregates on hand-computed examples: categories, exclusions, task average, abstention, intervals, cost."""

from __future__ import annotations

import json
import math

import pytest
from qa_support import lme_sample, locomo_sample

from memlane.bench.qa.aggregate import SampleScores, locomo_report, longmemeval_report, summarize
from memlane.bench.qa.bootstrap import BootstrapSettings, bootstrap_ci, stratified_bootstrap_ci
from memlane.bench.qa.costs import ModelPrice, stage_costs, total_cost
from memlane.bench.qa.records import CallUsage
from memlane.core.errors import ValidationError

FAST = BootstrapSettings(resamples=200)


def usage(model: str, tokens_in: int | None, tokens_out: int | None, cached: bool = False) -> CallUsage:
    return CallUsage(model, tokens_in, tokens_out, 1.0, cached, None)


def locomo_rows() -> list[SampleScores]:
    table = [  # (category, f1, j)
        (1, 0.5, 1.0),
        (1, 1.0, 0.0),
        (2, 0.0, 1.0),
        (4, 1.0, 1.0),
        (4, 0.5, 1.0),
        (4, 0.0, 0.0),
        (5, 1.0, 1.0),
        (5, 0.0, 1.0),
    ]
    return [
        SampleScores.of(locomo_sample(c, index=i), {"f1": f1, "j": j}, context_tokens=100 * (i + 1))
        for i, (c, f1, j) in enumerate(table)
    ]


def test_locomo_categories_both_label_schemes_and_category_5_apart() -> None:
    report = locomo_report(locomo_rows(), metrics=("f1", "j"), settings=FAST)
    rows = {row.key: row for row in report.categories}
    assert list(rows) == ["1", "2", "4", "5"]
    assert (rows["1"].name, rows["1"].mem0_name) == ("multi-hop", "single-hop")
    assert (rows["4"].name, rows["4"].mem0_name) == ("single-hop", "open-domain")
    assert [row.excluded for row in report.categories] == [False, False, False, True]
    assert rows["1"].metrics["j"].mean == 0.5
    assert rows["4"].metrics["f1"].mean == pytest.approx(0.5)
    assert rows["5"].metrics["j"].mean == 1.0
    # Categories 1-4: J = 4/6, F1 = (0.5 + 1 + 0 + 1 + 0.5 + 0) / 6; with category 5: J = 6/8.
    assert report.overall["j"].mean == pytest.approx(4 / 6)
    assert report.overall["j"].n == 6
    assert report.overall["f1"].mean == pytest.approx(3 / 6)
    assert report.overall_all["j"].mean == pytest.approx(6 / 8)
    assert report.excluded == ("5",)
    assert report.mean_context_tokens == pytest.approx(450.0)


def test_nothing_excluded_on_request() -> None:
    report = locomo_report(locomo_rows(), metrics=("j",), excluded=(), settings=FAST)
    assert report.overall["j"].mean == pytest.approx(6 / 8)
    assert not any(row.excluded for row in report.categories)


def test_failures_are_counted_not_averaged_as_zero() -> None:
    rows = [*locomo_rows(), SampleScores.of(locomo_sample(2, index=9), {"f1": 0.0, "j": None})]
    report = locomo_report(rows, metrics=("f1", "j"), settings=FAST)
    assert (report.overall["j"].n, report.overall["j"].failed, report.overall["j"].mean) == (6, 1, pytest.approx(4 / 6))
    assert report.overall["f1"].failed == 0
    category_2 = next(row for row in report.categories if row.key == "2")
    assert (category_2.metrics["j"].n, category_2.metrics["j"].failed) == (1, 1)


def test_locomo_report_needs_locomo_categories() -> None:
    with pytest.raises(ValidationError):
        locomo_report([SampleScores.of(lme_sample("multi-session"), {"j": 1.0})], settings=FAST)


def lme_rows() -> list[SampleScores]:
    table = [  # (type, question id, j)
        ("single-session-user", "u1", 1.0),
        ("single-session-user", "u2", 1.0),
        ("single-session-user", "u3_abs", 0.0),
        ("temporal-reasoning", "t1", 0.0),
        ("temporal-reasoning", "t2_abs", 1.0),
        ("single-session-preference", "p1", 1.0),
    ]
    return [SampleScores.of(lme_sample(t, qid=qid), {"j": j}) for t, qid, j in table]


def test_longmemeval_overall_task_averaged_and_abstention() -> None:
    report = longmemeval_report(lme_rows(), settings=FAST)
    assert [row.key for row in report.categories] == [
        "single-session-user",
        "single-session-preference",
        "temporal-reasoning",
    ]
    assert report.categories[0].metrics["j"].mean == pytest.approx(2 / 3)  # abstention counts in its type
    assert report.overall["j"].mean == pytest.approx(4 / 6)
    assert report.task_averaged["j"].mean == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    assert report.abstention["j"].mean == pytest.approx(1 / 2)
    assert report.abstention["j"].n == 2
    low, high = report.task_averaged["j"].ci_low, report.task_averaged["j"].ci_high
    assert low is not None and high is not None and low <= report.task_averaged["j"].mean <= high


def test_bootstrap_intervals() -> None:
    assert bootstrap_ci([0.7] * 30) == (pytest.approx(0.7), pytest.approx(0.7))
    assert bootstrap_ci([]) is None
    coin = [0.0, 1.0] * 50
    seed1 = BootstrapSettings(seed=1)
    low, high = bootstrap_ci(coin, seed1, label="x")  # type: ignore[misc]
    # The normal approximation: 0.5 +- 1.96 * sqrt(0.25 / 100) = 0.5 +- 0.098.
    assert low == pytest.approx(0.402, abs=0.03) and high == pytest.approx(0.598, abs=0.03)
    assert bootstrap_ci(coin, seed1, label="x") == (low, high)  # seeded
    spread = [((i * 37) % 101) / 101 for i in range(60)]
    assert bootstrap_ci(spread, seed1) == bootstrap_ci(spread, seed1)
    assert bootstrap_ci(spread, seed1) != bootstrap_ci(spread, BootstrapSettings(seed=2))
    assert bootstrap_ci(spread, seed1, label="a") != bootstrap_ci(spread, seed1, label="b")
    assert stratified_bootstrap_ci([[1.0, 1.0], [0.0, 0.0], []]) == (pytest.approx(0.5), pytest.approx(0.5))
    with pytest.raises(ValueError):
        bootstrap_ci(coin, BootstrapSettings(level=1.5))


def test_summary_of_all_failed() -> None:
    summary = summarize([None, None], FAST)
    assert (summary.n, summary.failed, summary.mean, summary.ci_low) == (0, 2, None, None)


def test_tokens_and_cost_per_stage() -> None:
    prices = {"reader": ModelPrice(0.15, 0.60), "judge": ModelPrice(2.5, 10.0)}
    calls = [
        ("answer", usage("reader", 1000, 10)),
        ("answer", usage("reader", 3000, 30, cached=True)),
        ("judge", usage("judge", 200, 2)),
    ]
    answer, judge = stage_costs(calls, prices)
    assert (answer.calls, answer.cached_calls, answer.tokens_in, answer.tokens_out) == (2, 1, 4000, 40)
    assert answer.cost == pytest.approx((4000 * 0.15 + 40 * 0.60) / 1e6)
    assert judge.cost == pytest.approx((200 * 2.5 + 2 * 10.0) / 1e6)
    assert total_cost([answer, judge]) == pytest.approx(answer.cost + judge.cost)  # type: ignore[operator]
    (unknown,) = stage_costs([("judge", usage("other", 5, 5))], prices)
    assert unknown.cost is None and total_cost([answer, unknown]) is None
    (unreported,) = stage_costs([("answer", usage("reader", None, None))], prices)
    assert (unreported.unreported, unreported.cost) == (1, None)


def test_report_carries_stages_and_is_json() -> None:
    rows = [
        SampleScores.of(
            lme_sample("multi-session", qid=f"m{i}"),
            {"j": 1.0},
            context_tokens=50,
            calls=[("answer", usage("reader", 100, 5)), ("judge", usage("judge", 80, 1))],
        )
        for i in range(3)
    ]
    report = longmemeval_report(rows, settings=FAST, prices={"reader": ModelPrice(1.0, 1.0)})
    assert [(s.stage, s.calls, s.tokens_in) for s in report.stages] == [("answer", 3, 300), ("judge", 3, 240)]
    assert report.stages[0].cost == pytest.approx(315 / 1e6)
    assert report.cost is None  # the judge model has no price
    data = json.loads(json.dumps(report.to_json()))
    assert data["overall"]["j"]["mean"] == 1.0
    assert data["bootstrap"] == {"resamples": 200, "level": 0.95, "seed": 0}
    assert math.isclose(data["mean_context_tokens"], 50.0)
