"""Time parsing and rendering.

Every instant inside memlane is a timezone-aware ``datetime`` in UTC (stored as epoch seconds). The data
sets carry no zone, so their local times are read as UTC: what matters for memory is the order of events
and the wall-clock text a reader sees, and both survive that choice unchanged.

Accepted input formats:

* LoCoMo: ``"1:56 pm on 8 May, 2023"``
* LongMemEval: ``"2023/04/10 (Mon) 23:07"``
* ISO 8601: ``"2023-05-08T13:56:00Z"``, ``"2023-05-08 13:56"``, ``"2023-05-08"``, with or without an offset

Rendered annotation: ``"1:10 pm on 27 March, 2023"`` (the LoCoMo style, with the full month name).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memlane.core.errors import ValidationError

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]

# "1:56 pm on 8 May, 2023" (LoCoMo). The comma and the minutes are optional in the wild.
_LOCOMO = re.compile(
    r"^\s*(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)\s+on\s+"
    r"(?P<d>\d{1,2})\s+(?P<mon>[A-Za-z]+)\.?,?\s+(?P<y>\d{4})\s*$",
    re.IGNORECASE,
)
# "2023/04/10 (Mon) 23:07" (LongMemEval). The weekday is informative only.
_LME = re.compile(
    r"^\s*(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})\s*(?:\((?P<wd>[A-Za-z]{3})\))?\s*"
    r"(?:(?P<h>\d{1,2}):(?P<m>\d{2}))?\s*$"
)


def parse_time(text: str, *, where: str | None = None) -> datetime:
    """Parse a time in one of the supported formats into an aware UTC datetime.

    Raises :class:`ValidationError` naming ``where`` (a field or file position) when the text matches
    no format or names an impossible date.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"empty or non-text time {text!r}", where=where)
    try:
        m = _LOCOMO.match(text)
        if m:
            hour = int(m["h"])
            if not 1 <= hour <= 12:
                raise ValueError(f"hour {hour} is not on a 12-hour clock")
            pm = m["ampm"].lower().startswith("p")
            hour = hour % 12 + (12 if pm else 0)
            month = _MONTHS.get(m["mon"].lower())
            if month is None:
                raise ValueError(f"unknown month {m['mon']!r}")
            return datetime(int(m["y"]), month, int(m["d"]), hour, int(m["m"] or 0), tzinfo=UTC)
        m = _LME.match(text)
        if m:
            return datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["m"] or 0), tzinfo=UTC)
        return _parse_iso(text.strip())
    except ValueError as exc:
        raise ValidationError(f"cannot parse time {text!r}: {exc}", where=where) from None


def _parse_iso(text: str) -> datetime:
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("expected ISO 8601, '1:56 pm on 8 May, 2023' or '2023/04/10 (Mon) 23:07'") from None
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def to_utc(dt: datetime) -> datetime:
    """Return ``dt`` as an aware UTC datetime; naive values are taken to be UTC."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def coerce_time(value: datetime | str | float | int | None, *, where: str | None = None) -> datetime | None:
    """Accept a datetime, a parseable string or epoch seconds; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, bool):
        raise ValidationError(f"not a time: {value!r}", where=where)
    if isinstance(value, int | float):
        return from_epoch(float(value))
    return parse_time(value, where=where)


def annotate(dt: datetime) -> str:
    """Render the human-readable annotation, e.g. ``"1:10 pm on 27 March, 2023"``."""
    dt = to_utc(dt)
    hour12 = dt.hour % 12 or 12
    ampm = "am" if dt.hour < 12 else "pm"
    return f"{hour12}:{dt.minute:02d} {ampm} on {dt.day} {_MONTH_NAMES[dt.month - 1]}, {dt.year}"


def to_epoch(dt: datetime) -> float:
    """Epoch seconds of an aware (or UTC-naive) datetime."""
    return to_utc(dt).timestamp()


def from_epoch(seconds: float) -> datetime:
    """Aware UTC datetime from epoch seconds."""
    return datetime.fromtimestamp(seconds, tz=UTC)


def now_utc() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(tz=UTC)
