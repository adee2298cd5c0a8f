from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memlane.core.errors import ValidationError
from memlane.core.timefmt import annotate, coerce_time, from_epoch, parse_time, read_time, to_epoch


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("2023/04/10 (Mon) 23:07", datetime(2023, 4, 10, 23, 7, tzinfo=UTC)),
        ("2023/05/30 (Tue) 00:01", datetime(2023, 5, 30, 0, 1, tzinfo=UTC)),
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08 13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
        ("2023-05-08T15:56:00+02:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ],
)
def test_parse_dataset_formats(text: str, expected: datetime) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize(
    ("dt", "text"),
    [
        (datetime(2023, 3, 27, 13, 10, tzinfo=UTC), "1:10 pm on 27 March, 2023"),
        (datetime(2023, 3, 27, 0, 5, tzinfo=UTC), "12:05 am on 27 March, 2023"),
        (datetime(2023, 3, 27, 12, 0, tzinfo=UTC), "12:00 pm on 27 March, 2023"),
        (datetime(2024, 12, 1, 9, 7, tzinfo=UTC), "9:07 am on 1 December, 2024"),
    ],
)
def test_annotate(dt: datetime, text: str) -> None:
    assert annotate(dt) == text


@pytest.mark.parametrize(
    "text",
    ["1:56 pm on 8 May, 2023", "12:09 am on 13 September, 2023", "2023/04/10 (Mon) 23:07", "2023-01-31T00:00:00Z"],
)
def test_round_trip_through_annotation(text: str) -> None:
    dt = parse_time(text)
    assert parse_time(annotate(dt)) == dt
    assert from_epoch(to_epoch(dt)) == dt


def test_aware_input_is_converted_to_utc() -> None:
    cet = timezone(timedelta(hours=1))
    assert coerce_time(datetime(2023, 1, 1, 10, 0, tzinfo=cet)) == datetime(2023, 1, 1, 9, 0, tzinfo=UTC)
    assert coerce_time(datetime(2023, 1, 1, 10, 0)) == datetime(2023, 1, 1, 10, 0, tzinfo=UTC)
    assert coerce_time(0) == datetime(1970, 1, 1, tzinfo=UTC)
    assert coerce_time(None) is None


@pytest.mark.parametrize(
    "bad",
    ["", "   ", "yesterday", "13:10 pm on 27 March, 2023", "1:10 pm on 27 Smarch, 2023", "2023/02/30 (Thu) 10:00"],
)
def test_unparseable_time_names_the_field(bad: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_time(bad, where="messages[2].time")
    assert "messages[2].time" in str(err.value)


@pytest.mark.parametrize(
    ("text", "expected", "annotation"),
    [
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC), "8 May, 2023"),
        ("20230508", datetime(2023, 5, 8, tzinfo=UTC), "8 May, 2023"),
        ("2023/05/08 (Mon)", datetime(2023, 5, 8, tzinfo=UTC), "8 May, 2023"),
        ("2023/05/08", datetime(2023, 5, 8, tzinfo=UTC), "8 May, 2023"),
        ("8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC), "8 May, 2023"),
        ("2023-05-08T00:00:00Z", datetime(2023, 5, 8, tzinfo=UTC), "12:00 am on 8 May, 2023"),
        ("2023-05-08 13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "1:56 pm on 8 May, 2023"),
        ("2023/05/08 (Mon) 00:00", datetime(2023, 5, 8, tzinfo=UTC), "12:00 am on 8 May, 2023"),
    ],
)
def test_a_date_alone_is_annotated_as_a_date(text: str, expected: datetime, annotation: str) -> None:
    """A date without a time of day gets no made-up clock: midnight is what it sorts as, not what was said."""
    dt, time_of_day = read_time(text)
    assert dt == expected and annotate(dt, time_of_day=time_of_day) == annotation
    assert parse_time(annotation) == dt  # the annotation reads back


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2023/04/10 (Fri) 23:07", "2023/04/10 is a Mon, not a Fri: correct the date or the weekday"),
        ("2023/04/10 (fri)", "2023/04/10 is a Mon, not a Fri"),
        ("2023/04/10 (Xyz) 10:00", "unknown weekday 'Xyz'"),
    ],
)
def test_a_weekday_that_is_not_the_dates_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_time(text, where="time")
    assert str(err.value).startswith("time: cannot parse time") and message in str(err.value)
    assert parse_time("2023/04/10 (mon) 23:07") == datetime(2023, 4, 10, 23, 7, tzinfo=UTC)  # any case
