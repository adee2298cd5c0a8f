"""How long to wait before retrying: exponential backoff with full jitter, or the server's ``Retry-After``."""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RETRYABLE_STATUS = frozenset({408, 429})
"""Besides every 5xx."""


def is_retryable_status(status: int) -> bool:
    """429 (rate limit), 408 (request timeout) and every 5xx are worth another try."""
    return status in RETRYABLE_STATUS or status >= 500


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date), or ``None``.

    ``now`` is the current epoch time, used for the date form. A date in the past gives ``0.0``; a value
    that is neither form gives ``None`` (so the normal backoff applies).
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before retry number ``retry`` (0 for the first retry).

    Without a hint the delay is uniform in ``[0, min(cap_s, base_s * 2**retry)]`` ("full jitter", so many
    clients that failed together do not retry together). A ``Retry-After`` hint is obeyed as given, but
    never beyond ``retry_after_cap_s``.
    """

    base_s: float
    cap_s: float
    retry_after_cap_s: float

    def delay(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to sleep before the next attempt."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap_s)
        return rng.uniform(0.0, min(self.cap_s, self.base_s * 2.0 ** min(retry, 62)))
