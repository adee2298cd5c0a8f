"""Time parsing and rendering.

Every instant inside memlane is a timezone-aware ``datetime`` in UTC (stored as epoch seconds). The data
sets carry no zone, so their local times are read as UTC: what matters for memory is the order of events
and the wall-clock text a reader sees, and both survive that choice unchanged.

Accepted input formats:

* LoCoMo: ``"1:56 pm on 8 May, 2023"``, or a date alone, ``"8 May, 2023"``
* LongMemEval: ``"2023/04/10 (Mon) 23:07"``, the weekday and the clock optional
* ISO 8601: ``"2023-05-08T13:56:00Z"``, ``"2023-05-08 13:56"``, ``"2023-05-08"``, with or without an offset

A LongMemEval weekday must be the date's (``"2023/04/10 (Fri)"`` is refused: 10 April 2023 was a Monday,
and memlane cannot tell which of the two is wrong).

Rendered annotation: ``"1:10 pm on 27 March, 2023"`` (the LoCoMo style, with the full month name); a time
given as a date alone (``"2023-05-08"``, ``"2023/05/08 (Mon)"``) is annotated as the date, ``"8 May,
2023"``, not with a midnight nobody said (:func:`read_time` says whether a text names a time of day).

Accepted range: from ``0001-01-01T00:00:00Z`` to ``9999-12-31T23:59:59Z`` once converted to UTC (epoch
seconds from -62135596800 to 253402300799), the span a ``datetime`` holds. The upper end is a whole second:
a time stores as epoch seconds in a double, which near year 9999 keeps about 30 microseconds, so
``23:59:59.999999`` would round to the first second of year 10000 and could not be read back. Anything
accepted can be annotated, stored, read back and used as a search bound; anything else (an offset that
pushes a time past either end, ``NaN``, ``inf``, ``1e20``) is a :class:`ValidationError` naming the field.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime

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

# "1:56 pm on 8 May, 2023" (LoCoMo). The comma and the minutes are optional in the wild; without the clock
# ("8 May, 2023") it is a date alone, as memlane annotates one.
_LOCOMO = re.compile(
    r"^\s*(?:(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)\s+on\s+)?"
    r"(?P<d>\d{1,2})\s+(?P<mon>[A-Za-z]+)\.?,?\s+(?P<y>\d{4})\s*$",
    re.IGNORECASE,
)
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# "2023/04/10 (Mon) 23:07" (LongMemEval). The weekday must agree with the date.
_LME = re.compile(
    r"^\s*(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})\s*(?:\((?P<wd>[A-Za-z]{3})\))?\s*"
    r"(?:(?P<h>\d{1,2}):(?P<m>\d{2}))?\s*$"
)

MIN_TIME = datetime(1, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
MIN_EPOCH = -62_135_596_800
MAX_EPOCH = 253_402_300_799
RANGE_TEXT = "times run from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z (epoch seconds -62135596800 to 253402300799)"


def parse_time(text: str, *, where: str | None = None) -> datetime:
    """Parse a time in one of the supported formats into an aware UTC datetime.

    Raises :class:`ValidationError` naming ``where`` (a field or file position) when the text matches
    no format or names an impossible date.
    """
    return read_time(text, where=where)[0]


def read_time(text: str, *, where: str | None = None) -> tuple[datetime, bool]:
    """:func:`parse_time`, and whether the text names a time of day (False for a date alone, which reads
    as midnight UTC)."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"empty or non-text time {_echo(text)}", where=where)
    try:
        m = _LOCOMO.match(text)
        if m:
            month = _MONTHS.get(m["mon"].lower())
            if month is None:
                raise ValueError(f"unknown month {m['mon']!r}")
            if m["h"] is None:
                return datetime(int(m["y"]), month, int(m["d"]), tzinfo=UTC), False
            hour = int(m["h"])
            if not 1 <= hour <= 12:
                raise ValueError(f"hour {hour} is not on a 12-hour clock")
            pm = m["ampm"].lower().startswith("p")
            hour = hour % 12 + (12 if pm else 0)
            return datetime(int(m["y"]), month, int(m["d"]), hour, int(m["m"] or 0), tzinfo=UTC), True
        m = _LME.match(text)
        if m:
            dt = datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["m"] or 0), tzinfo=UTC)
            if m["wd"] is not None:
                _check_weekday(dt, m["wd"])
            return dt, m["h"] is not None
        stripped = text.strip()
        return check_range(_parse_iso(stripped), where=where), not _date_only(stripped)
    except OverflowError:
        raise ValidationError(f"{_echo(text)} is out of range: {RANGE_TEXT}", where=where) from None
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(f"cannot parse time {_echo(text)}: {exc}", where=where) from None


def _check_weekday(dt: datetime, given: str) -> None:
    actual = _WEEKDAYS[dt.weekday()]
    if given.lower() not in _WEEKDAYS:
        raise ValueError(f"unknown weekday {given!r} (Mon to Sun)")
    if given.lower() != actual:
        raise ValueError(f"{dt:%Y/%m/%d} is a {actual.title()}, not a {given.title()}: correct the date or the weekday")


def _date_only(text: str) -> bool:
    """Whether an ISO 8601 text is a calendar date with no time of day."""
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _echo(value: object) -> str:
    """The input as an error message quotes it: a repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


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


def check_range(dt: datetime, *, where: str | None = None) -> datetime:
    """``dt`` in UTC, or a ValidationError when it falls outside the accepted range (see the module doc)."""
    try:
        utc = to_utc(dt)
    except OverflowError:
        raise ValidationError(f"{dt.isoformat()} is out of range: {RANGE_TEXT}", where=where) from None
    if not MIN_TIME <= utc <= MAX_TIME:
        raise ValidationError(f"{utc.isoformat()} is out of range: {RANGE_TEXT}", where=where)
    return utc


def coerce_time(value: datetime | str | float | int | None, *, where: str | None = None) -> datetime | None:
    """Accept a datetime, a parseable string or epoch seconds inside the accepted range; ``None`` stays
    ``None``. Anything else is a ValidationError naming ``where``."""
    return coerce_time_of_day(value, where=where)[0]


def coerce_time_of_day(
    value: datetime | str | float | int | None, *, where: str | None = None
) -> tuple[datetime | None, bool]:
    """:func:`coerce_time`, and whether the value names a time of day: a text may be a date alone (see
    :func:`read_time`); a datetime or epoch seconds always count as naming one."""
    if value is None:
        return None, True
    if isinstance(value, datetime):
        return check_range(value, where=where), True
    if isinstance(value, bool):
        raise ValidationError(f"not a time: {value!r}", where=where)
    if isinstance(value, int | float):
        # Compared before any conversion: a huge int does not fit a float, NaN compares false to all.
        if not (MIN_EPOCH <= value <= MAX_EPOCH):
            raise ValidationError(f"epoch seconds {_short(value)} out of range: {RANGE_TEXT}", where=where)
        return from_epoch(float(value)), True
    return read_time(value, where=where)


def _short(value: float) -> str:
    # repr of an int of thousands of digits is slow, or refused (sys.get_int_max_str_digits).
    if isinstance(value, int) and value.bit_length() > 128:
        return f"{'-' if value < 0 else ''}(a {math.floor(value.bit_length() * math.log10(2)) + 1}-digit number)"
    return repr(value)


def annotate(dt: datetime, *, time_of_day: bool = True) -> str:
    """Render the human-readable annotation, e.g. ``"1:10 pm on 27 March, 2023"``; without
    ``time_of_day`` (a time given as a date alone) the date, ``"27 March, 2023"``."""
    dt = to_utc(dt)
    if not time_of_day:
        return f"{dt.day} {_MONTH_NAMES[dt.month - 1]}, {dt.year}"
    hour12 = dt.hour % 12 or 12
    ampm = "am" if dt.hour < 12 else "pm"
    return f"{hour12}:{dt.minute:02d} {ampm} on {dt.day} {_MONTH_NAMES[dt.month - 1]}, {dt.year}"


def to_epoch(dt: datetime) -> float:
    """Epoch seconds of an aware (or UTC-naive) datetime."""
    return to_utc(dt).timestamp()


def from_epoch(seconds: float) -> datetime:
    """Aware UTC datetime from epoch seconds (within the accepted range; see :func:`coerce_time` for input).

    Values just past the end are read as the last accepted second: a store written before the range was
    checked may hold ``253402300800.0`` (``23:59:59.999999`` on 31 December 9999, rounded), and that block
    must stay readable."""
    return datetime.fromtimestamp(min(max(seconds, MIN_EPOCH), MAX_EPOCH), tz=UTC)


def now_utc() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(tz=UTC)
