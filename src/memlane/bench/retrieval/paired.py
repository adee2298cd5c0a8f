"""Paired comparison of two rankers on the same questions: is a difference more than noise?

Two modes of a run (or one mode in two runs) answer the same questions, so their difference is read
question by question: how many questions one gets and the other misses, the mean difference with a 95%
bootstrap interval (questions resampled with replacement, a fixed seed so reports regenerate identically),
and the two-sided exact sign test over the questions where they differ. On the 81 questions of a
LongMemEval dev split, a gain of three questions in one direction and none in the other has p = 0.25: the
choice of a preset should not rest on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
SEED = 0


@dataclass(frozen=True)
class PairedDiff:
    """B against A on the questions both scored: ``better`` questions where B is higher, ``worse`` where
    it is lower; ``mean`` = mean(B - A) with its bootstrap interval; ``p`` the sign test's two-sided p."""

    n: int
    better: int
    worse: int
    mean: float
    low: float
    high: float
    p: float


def sign_test(better: int, worse: int) -> float:
    """Two-sided exact binomial test of ``better`` against ``worse`` with success probability 1/2."""
    m = better + worse
    if m == 0:
        return 1.0
    tail: int = sum(math.comb(m, i) for i in range(min(better, worse) + 1))
    return min(1.0, float(2 * tail / 2**m))


def paired_diff(
    a: Mapping[str, float], b: Mapping[str, float], *, resamples: int = RESAMPLES, seed: int = SEED
) -> PairedDiff | None:
    """Compare per-question scores keyed by question id; None when no question is in both."""
    shared = sorted(a.keys() & b.keys())
    if not shared:
        return None
    diff = np.array([b[q] - a[q] for q in shared], dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    better = int((diff > 0).sum())
    worse = int((diff < 0).sum())
    return PairedDiff(len(shared), better, worse, float(diff.mean()), float(low), float(high), sign_test(better, worse))


def format_diff(d: PairedDiff | None) -> str:
    """``+0.012 [-0.004, +0.027], +9 / -5, p 0.42`` (or ``-`` without shared questions)."""
    if d is None:
        return "-"
    return f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}], +{d.better} / -{d.worse}, p {d.p:.2g}"
