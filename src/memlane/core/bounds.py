"""The bounds of the numbers callers hand memlane that end up in a query: prompt versions, page sizes and
offsets, counts, job ids, a worker's concurrency and lease. Each is checked where it enters the core
(:func:`check_int`, :func:`check_seconds`), against one constant here that the interfaces' schemas and
options name too, so that no value past what a query takes (SQLite's and PostgreSQL's integers are 64-bit:
2**63 used to be a 500), no NaN and no infinity gets further than a clear error naming the field.

The other numbers have their own bounds where they are defined: ``k`` (``memlane.core.retrieval.settings``),
TTLs (``memlane.core.model_checks``), retention policies (``memlane.core.retention``), times
(``memlane.core.timefmt``: year 1 to 9999, finite).
"""

from __future__ import annotations

import math

from memlane.core.errors import ValidationError

MAX_VERSION = 2**31 - 1  # a prompt's versions, from 0: one a second for 68 years
MAX_PAGE = 10_000  # what one listing returns at most (``limit``)
MAX_OFFSET = 1_000_000_000  # where a listing may start
MAX_ROW_ID = 2**63 - 1  # a row id the store made (a job's): the largest a 64-bit integer column holds
MAX_CONCURRENCY = 1024  # extraction jobs one process runs at once
MAX_PERIOD_S = 366 * 86_400.0  # any wait, lease or interval: a year
MIN_WAIT_S = 0.001  # the shortest lease or poll interval


def check_int(value: object, where: str, lo: int, hi: int, what: str = "a whole number") -> int:
    """``value`` if it is an integer (not a bool) from ``lo`` to ``hi``, else a ValidationError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValidationError(f"must be {what} from {lo} to {hi}, not {value!r}", where=where)
    return value


def check_seconds(value: object, where: str, lo: float, hi: float) -> float:
    """``value`` as seconds if it is a finite number from ``lo`` to ``hi``, else a ValidationError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"must be a number of seconds, not {value!r}", where=where)
    if not lo <= value <= hi:
        raise ValidationError(f"must be from {lo:g} to {hi:g} seconds, not {value!r}", where=where)
    return float(value)
