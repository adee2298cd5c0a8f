"""Seeded percentile-bootstrap confidence intervals for means of per-question scores.

Each resample draws ``n`` questions with replacement and takes the mean; the interval is the
``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of those means (numpy's default linear
interpolation). The task-averaged variant resamples within each group (stratified), so every resample
keeps every group, then averages the group means. The generator is seeded from ``seed`` and a label
(group and metric), so an interval does not depend on which others were computed before it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0


@dataclass(frozen=True)
class BootstrapSettings:
    """How intervals are drawn (recorded in the report): ``resamples`` resamples, a ``level`` interval
    (0.95: the central 95% of the resampled means), the generator seeded from ``seed``."""

    resamples: int = DEFAULT_RESAMPLES
    level: float = DEFAULT_LEVEL
    seed: int = DEFAULT_SEED


DEFAULT_BOOTSTRAP = BootstrapSettings()


def _rng(seed: int, label: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(label.encode("utf-8"))])


def _check(settings: BootstrapSettings) -> None:
    if settings.resamples < 1:
        raise ValueError("resamples must be >= 1")
    if not 0.0 < settings.level < 1.0:
        raise ValueError("level must be between 0 and 1")


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float], settings: BootstrapSettings = DEFAULT_BOOTSTRAP, label: str = ""
) -> tuple[float, float] | None:
    """Interval for the mean of ``values``; ``None`` when there are none."""
    _check(settings)
    if not values:
        return None
    data = np.asarray(values, dtype=float)
    picks = _rng(settings.seed, label).integers(0, len(data), size=(settings.resamples, len(data)))
    return _interval(data[picks].mean(axis=1), settings.level)


def stratified_bootstrap_ci(
    groups: Sequence[Sequence[float]], settings: BootstrapSettings = DEFAULT_BOOTSTRAP, label: str = ""
) -> tuple[float, float] | None:
    """Interval for the mean of the group means (empty groups are left out); ``None`` if all are empty."""
    _check(settings)
    kept = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not kept:
        return None
    rng = _rng(settings.seed, label)
    group_means = [g[rng.integers(0, len(g), size=(settings.resamples, len(g)))].mean(axis=1) for g in kept]
    return _interval(np.mean(np.stack(group_means), axis=0), settings.level)
