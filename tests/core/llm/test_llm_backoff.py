"""Backoff delays and Retry-After parsing."""

from __future__ import annotations

import email.utils
import random

import pytest

from memlane.core.llm.backoff import Backoff, is_retryable_status, parse_retry_after

NOW = 1_700_000_000.0


def test_full_jitter_stays_under_the_doubling_bound_and_the_cap() -> None:
    backoff = Backoff(base_s=0.5, cap_s=4.0, retry_after_cap_s=60.0)
    rng = random.Random(1)
    for retry in range(12):
        bound = min(4.0, 0.5 * 2**retry)
        delays = [backoff.delay(retry, rng) for _ in range(200)]
        assert all(0.0 <= d <= bound for d in delays)
        assert max(delays) > bound * 0.8  # jitter spreads over the whole range
    assert backoff.delay(10_000, rng) <= 4.0  # no overflow on absurd retry numbers


def test_same_seed_same_delays() -> None:
    backoff = Backoff(0.5, 30.0, 60.0)
    a, b = random.Random(3), random.Random(3)
    assert [backoff.delay(i, a) for i in range(5)] == [backoff.delay(i, b) for i in range(5)]


def test_retry_after_replaces_backoff_up_to_its_cap() -> None:
    backoff = Backoff(0.5, 4.0, retry_after_cap_s=10.0)
    assert backoff.delay(0, random.Random(), retry_after=7.0) == 7.0
    assert backoff.delay(0, random.Random(), retry_after=120.0) == 10.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-4", 0.0),
        (email.utils.formatdate(NOW + 42, usegmt=True), 42.0),
        (email.utils.formatdate(NOW - 42, usegmt=True), 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, NOW) == seconds


def test_retryable_statuses() -> None:
    assert [s for s in (200, 400, 401, 404, 408, 409, 422, 429, 500, 502, 503, 504) if is_retryable_status(s)] == [
        408,
        429,
        500,
        502,
        503,
        504,
    ]
