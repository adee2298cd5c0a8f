"""Time phrases in a query ("two weeks ago", "last month", "in the past three months") as time windows.

A question about memory often says when: "What kitchen appliance did I buy 10 days ago?", "I mentioned a
museum two months ago...". Read against the time the question is asked (``at``), such a phrase names a
stretch of the user's history, and search can prefer the blocks whose event time falls inside it (see
``time_weight`` in :mod:`memlane.core.retrieval`). The windows are a preference, never a filter: people
misremember dates, and a fact may be told days after it happened.

Two kinds of phrase are read:

* a *point*: "N days / weeks / months / years ago" (N a number or a word: "a", "a couple of", "a few",
  "two", ...), "yesterday", "the day before yesterday", "last week / month / year", "last weekend" (the
  Saturday and Sunday before the day of ``at``), "last Friday" (the most recent Friday before that day),
  "a fortnight ago" (14 days), "the other day" (3 days).
  The window is the point plus or minus ``tolerance`` x its distance from ``at`` (at least
  ``min_days``): "four weeks ago" with tolerance 0.5 is 14 to 42 days before ``at``;
* a *span* up to now: "in / over / during the past (or last) N days / weeks / months / years", "in the
  past month", "these past few weeks", "this week / month / year" (since its Monday, its first day,
  1 January; at least a day), "earlier today", "this morning" (a day). The window runs from
  ``(1 + tolerance / 2)`` x the span before ``at`` to one day after it (a session may be dated later on
  the day the question is asked).

"How many days ago ...", "how long ago ..." ask for a distance instead of giving one: they give no window.
Only English phrases are read, and not yet month names ("in May"), dates ("on 3 May") or a weekday
without "last" ("on Monday": often a habit, as in "on Saturday mornings"), nor "today" alone ("what
should I cook today?" asks for no memory of today).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, tzinfo

from memlane.core.timefmt import to_epoch

DAY = 86_400.0
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_NUMBER = "(" + "|".join([r"\d{1,4}", *sorted(_WORDS, key=len, reverse=True)]) + ")"
_UNIT = r"(day|week|month|year)s?"
_AGO = re.compile(rf"\b{_NUMBER}\s+{_UNIT}\s+ago\b", re.IGNORECASE)
_ASKS_DISTANCE = re.compile(
    r"\bhow\s+(?:long|many\s+(?:\w+\s+)?(?:hours?|days?|weeks?|months?|years?))\s+ago\b", re.IGNORECASE
)
_DAY_BEFORE_YESTERDAY = re.compile(r"\bthe\s+day\s+before\s+yesterday\b", re.IGNORECASE)
_YESTERDAY = re.compile(r"\byesterday\b", re.IGNORECASE)
_SPAN = re.compile(
    rf"\b(?:in|over|during|within|for|these)\s+the\s+(?:past|last)\s+(?:{_NUMBER}\s+)?{_UNIT}"
    rf"|\b(?:these|the)\s+past\s+(?:{_NUMBER}\s+)?{_UNIT}",
    re.IGNORECASE,
)
_LAST = re.compile(r"\blast\s+(week|weekend|month|year)\b", re.IGNORECASE)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_LAST_WEEKDAY = re.compile(rf"\blast\s+({'|'.join(_WEEKDAYS)})\b", re.IGNORECASE)
_THIS = re.compile(r"\bthis\s+(week|month|year)\b", re.IGNORECASE)
_TODAY = re.compile(r"\b(?:earlier\s+today|this\s+morning)\b", re.IGNORECASE)
_FORTNIGHT = re.compile(r"\ba\s+fortnight\s+ago\b", re.IGNORECASE)
_OTHER_DAY = re.compile(r"\bthe\s+other\s+day\b", re.IGNORECASE)
# Phrases that always name the same distance, in days ("the day before yesterday" before "yesterday").
_FIXED_POINTS = ((_DAY_BEFORE_YESTERDAY, 2.0), (_YESTERDAY, 1.0), (_FORTNIGHT, 14.0), (_OTHER_DAY, 3.0))


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A stretch of time in epoch seconds, ``start <= end``, and the phrase it was read from."""

    start: float
    end: float
    phrase: str
    until_now: bool = False  # a span up to the time asked ("in the past three months"), not a point before it

    def holds(self, epoch: float) -> bool:
        return self.start <= epoch <= self.end


def _count(word: str | None) -> float:
    if word is None:
        return 1.0
    word = " ".join(word.lower().split())
    return float(word) if word.isdigit() else float(_WORDS[word])


def time_windows(text: str, at: datetime, *, tolerance: float = 0.5, min_days: float = 2.0) -> tuple[TimeWindow, ...]:
    """The windows the time phrases of ``text`` name, read against ``at`` (see the module doc); none when
    the text has no time phrase or asks how long ago something was."""
    if tolerance < 0 or min_days < 0:
        raise ValueError("tolerance and min_days must not be negative")
    return _windows(text, at, at.tzinfo, tolerance, min_days)


# A search reads its query's windows more than once (to rank, and to see whether supersession applies), each
# time against the same ``at``: kept for the last few. ``at`` is read in its own time zone (its weekday,
# day and hour), so the zone is part of the key as well as the instant.
@functools.lru_cache(maxsize=32)
def _windows(
    text: str, at: datetime, _zone: tzinfo | None, tolerance: float, min_days: float
) -> tuple[TimeWindow, ...]:
    if _ASKS_DISTANCE.search(text):
        return ()
    now = to_epoch(at)
    points: list[tuple[float, str]] = []
    spans: list[tuple[float, str]] = []
    taken: list[tuple[int, int]] = []

    def matches(pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
        """The pattern's matches that overlap no phrase read before (patterns go longest-phrase first)."""
        for m in pattern.finditer(text):
            if not any(m.start() < end and start < m.end() for start, end in taken):
                taken.append((m.start(), m.end()))
                yield m

    for m in matches(_SPAN):
        spans.append((_count(m.group(1) or m.group(3)) * _UNIT_DAYS[(m.group(2) or m.group(4)).lower()], m[0]))
    for m in matches(_THIS):
        # This week / month / year: since its Monday, its first day, 1 January.
        since = {"week": at.weekday(), "month": at.day - 1, "year": at.timetuple().tm_yday - 1}[m.group(1).lower()]
        spans.append((max(1.0, since + at.hour / 24 + at.minute / 1440), m[0]))
    for m in matches(_TODAY):
        spans.append((1.0, m[0]))  # the span's floor: a day back, not just since midnight
    for m in matches(_LAST_WEEKDAY):
        # The most recent such day before the day of ``at`` (last Saturday, asked on a Saturday: a week back).
        points.append(((at.weekday() - _WEEKDAYS.index(m.group(1).lower())) % 7 or 7, m[0]))
    for m in matches(_AGO):
        points.append((_count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()], m[0]))
    for pattern, days in _FIXED_POINTS:
        points.extend((days, m[0]) for m in matches(pattern))
    for m in matches(_LAST):
        unit = m.group(1).lower()
        # Last weekend: the Saturday and Sunday before the day of ``at`` (a Sunday's is a week back).
        points.append((((at.weekday() + 1) % 7 or 7) + 0.5 if unit == "weekend" else _UNIT_DAYS[unit], m[0]))
    out = []
    for days, phrase in points:
        half = max(min_days, tolerance * days)
        out.append(TimeWindow(now - (days + half) * DAY, now - (days - half) * DAY, phrase))
    for days, phrase in spans:
        out.append(TimeWindow(now - days * (1 + tolerance / 2) * DAY, now + DAY, phrase, until_now=True))
    return tuple(sorted(out, key=lambda w: (w.start, w.end)))
