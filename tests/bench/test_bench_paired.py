"""Paired comparisons: the sign test, the bootstrap interval, and pairing by question id."""

from __future__ import annotations

import math

import pytest

from memlane.bench.retrieval.paired import format_diff, paired_diff, sign_test


def test_sign_test_exact_values() -> None:
    assert sign_test(0, 0) == 1.0
    assert sign_test(3, 0) == pytest.approx(0.25)  # 2 * (1/2)^3
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    assert sign_test(0, 10) == sign_test(10, 0)
    assert sign_test(5, 5) == 1.0
    # 12 against 3: 2 * sum_{i<=3} C(15, i) / 2^15
    assert sign_test(12, 3) == pytest.approx(2 * sum(math.comb(15, i) for i in range(4)) / 2**15)
    assert sign_test(600, 500) < 0.01  # large counts stay exact (no float overflow)


def test_paired_diff_counts_pairs_by_question_and_brackets_the_mean() -> None:
    a = {f"q{i}": 0.0 for i in range(40)} | {"only-a": 1.0}
    b = {f"q{i}": 1.0 if i < 12 else -1.0 if i < 15 else 0.0 for i in range(40)} | {"only-b": 0.0}
    d = paired_diff(a, b)
    assert d is not None
    assert (d.n, d.better, d.worse) == (40, 12, 3)
    assert d.mean == pytest.approx((12 - 3) / 40)
    assert d.low < d.mean < d.high
    assert d.p == pytest.approx(sign_test(12, 3))
    assert paired_diff(a, b) == d  # a fixed seed: reports regenerate identically
    assert paired_diff({"x": 1.0}, {"y": 1.0}) is None


def test_identical_rankers_differ_by_nothing() -> None:
    scores = {f"q{i}": float(i % 2) for i in range(30)}
    d = paired_diff(scores, dict(scores))
    assert d is not None and (d.better, d.worse, d.mean, d.low, d.high, d.p) == (0, 0, 0.0, 0.0, 0.0, 1.0)
    assert format_diff(d) == "+0.000 [+0.000, +0.000], +0 / -0, p 1"
    assert format_diff(None) == "-"
