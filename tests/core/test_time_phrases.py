"""Time phrases of a query read as windows of time, and what they do to a search."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.retrieval import PRESETS, Position, SearchSettings, rescore
from memlane.core.store.sqlite import SqliteStore
from memlane.core.time_phrases import DAY, TimeWindow, time_windows

AT = datetime(2023, 5, 30, 12, 0, tzinfo=UTC)  # a Tuesday
DAY_ = timedelta(days=1)


def days_before(text: str, at: datetime = AT, tolerance: float = 0.5) -> list[tuple[float, float, str]]:
    """Each window as (nearest, farthest) days before ``at``, and its phrase."""
    now = at.timestamp()
    return [
        (round((now - w.end) / DAY, 2), round((now - w.start) / DAY, 2), w.phrase)
        for w in time_windows(text, at, tolerance=tolerance)
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What kitchen appliance did I buy 10 days ago?", [(5.0, 15.0, "10 days ago")]),
        ("I mentioned a museum two months ago.", [(30.44, 91.32, "two months ago")]),
        ("the investment I made four weeks ago", [(14.0, 42.0, "four weeks ago")]),
        ("what I cooked a couple of days ago", [(0.0, 4.0, "a couple of days ago")]),  # at least 2 days wide
        ("A week ago I said", [(3.5, 10.5, "A week ago")]),
        ("what did I do yesterday", [(-1.0, 3.0, "yesterday")]),
        ("the day before yesterday", [(0.0, 4.0, "the day before yesterday")]),
        ("What did I try last weekend?", [(0.5, 4.5, "last weekend")]),  # Sat-Sun before Tuesday: 2-3 days
        ("last year I moved", [(182.62, 547.88, "last year")]),
        ("plants I acquired in the last month", [(-1.0, 38.05, "in the last month")]),
        ("trips I took in the past three months", [(-1.0, 114.15, "in the past three months")]),
        ("videos watched these past few weeks", [(-1.0, 26.25, "these past few weeks")]),
        ("books over the past 2 years", [(-1.0, 913.12, "over the past 2 years")]),
        ("What did I say 3 days ago and last month?", [(15.22, 45.66, "last month"), (1.0, 5.0, "3 days ago")]),
        ("Who did I meet last Friday?", [(2.0, 6.0, "last Friday")]),  # Friday 26 May, 4 days before Tuesday
        ("lunch last Tuesday", [(3.5, 10.5, "last Tuesday")]),  # asked on a Tuesday: a week back
        ("How many weddings this year?", [(-1.0, 186.88, "this year")]),  # since 1 January: 149.5 days
        ("money made this month", [(-1.0, 36.88, "this month")]),  # since 1 May: 29.5 days
        ("runs this week", [(-1.0, 1.88, "this week")]),  # since Monday: 1.5 days
        ("What did I tell you earlier today?", [(-1.0, 1.25, "earlier today")]),
        ("the plan I made this morning", [(-1.0, 1.25, "this morning")]),
        ("the book I finished a fortnight ago", [(7.0, 21.0, "a fortnight ago")]),
        ("the recipe I tried the other day", [(1.0, 5.0, "the other day")]),
    ],
)
def test_phrases_name_windows(text: str, expected: list[tuple[float, float, str]]) -> None:
    assert sorted(days_before(text), key=lambda w: -w[1]) == expected


@pytest.mark.parametrize(
    "text",
    [
        "How many days ago did I buy a smoker?",
        "how long ago did I meet Emma",
        "How many weeks ago did I start using the app? It was last month",  # it asks; no window
        "What is my favourite colour?",
        "Where did I go during my last trip?",
        "the last day of the festival",
        "I have several weeks of leave",
        "What time do I wake up on Saturday mornings?",
        "What should I cook today?",
    ],
)
def test_no_window_without_a_phrase_or_when_the_question_asks_the_distance(text: str) -> None:
    assert time_windows(text, AT) == ()


def test_one_instant_asked_in_two_time_zones_reads_each_ones_day() -> None:
    # Sunday 23:00 in UTC is Monday 01:00 two hours east: "last weekend" is a week back for the first, and
    # the one just gone for the second, though both are one instant (the windows of a query are kept).
    sunday = datetime(2023, 5, 28, 23, 0, tzinfo=UTC)
    monday = sunday.astimezone(timezone(timedelta(hours=2)))
    assert sunday == monday
    (w_sunday,) = time_windows("last weekend", sunday, tolerance=0.0, min_days=0.5)
    (w_monday,) = time_windows("last weekend", monday, tolerance=0.0, min_days=0.5)
    assert w_monday.holds((monday - timedelta(days=1)).timestamp())
    assert not w_sunday.holds((sunday - timedelta(days=1)).timestamp())


def test_last_weekend_depends_on_the_day_asked() -> None:
    monday = datetime(2023, 5, 29, 9, 0, tzinfo=UTC)
    sunday = datetime(2023, 5, 28, 9, 0, tzinfo=UTC)
    (w_monday,) = time_windows("last weekend", monday, tolerance=0.0, min_days=0.5)
    (w_sunday,) = time_windows("last weekend", sunday, tolerance=0.0, min_days=0.5)
    assert w_monday.holds((monday - timedelta(days=1.5)).timestamp())  # Saturday night, just gone
    assert not w_sunday.holds((sunday - timedelta(days=1)).timestamp())  # this weekend is not the last one
    assert w_sunday.holds((sunday - timedelta(days=7.5)).timestamp())


def test_tolerance_widens_point_windows_and_spans() -> None:
    assert days_before("10 days ago", tolerance=0.25) == [(7.5, 12.5, "10 days ago")]
    assert days_before("10 days ago", tolerance=1.0) == [(0.0, 20.0, "10 days ago")]
    assert days_before("in the past month", tolerance=1.0) == [(-1.0, 45.66, "in the past month")]
    with pytest.raises(ValueError, match="must not be negative"):
        time_windows("10 days ago", AT, tolerance=-0.1)


def test_window_bounds_are_inclusive() -> None:
    w = TimeWindow(10.0, 20.0, "x")
    assert w.holds(10.0) and w.holds(20.0) and not w.holds(9.99) and not w.holds(20.01)


def test_rescore_adds_the_time_gain_inside_a_window_only() -> None:
    settings = SearchSettings(time_weight=0.4)
    assert settings.uses_time and settings.uses_context
    scores = {1: 1.0, 2: 0.5, 3: 0.5, 4: 0.2}
    positions = {1: Position("a", 0, 100.0), 2: Position("b", 0, 15.0), 3: Position("c", 0), 4: Position("d", 0, 40.0)}
    windows = (TimeWindow(10.0, 20.0, "p"), TimeWindow(35.0, 45.0, "q"))
    out = rescore(scores, positions, settings, None, windows)
    assert out == pytest.approx({1: 1.0, 2: 0.5 + 0.4, 3: 0.5, 4: 0.2 + 0.4})  # 3 has no time: no gain
    assert rescore(scores, positions, settings) == scores  # no phrase, no windows
    assert rescore(scores, positions, SearchSettings(session_weight=0.1), None, windows)[2] == pytest.approx(0.55)


def test_settings_check_the_time_fields() -> None:
    with pytest.raises(ValidationError, match="time_weight"):
        SearchSettings(time_weight=-0.1)
    with pytest.raises(ValidationError, match="time_tolerance"):
        SearchSettings(time_tolerance=2.5)
    assert PRESETS["hybrid"].uses_time and not PRESETS["hybrid-no-time"].uses_time
    assert replace(PRESETS["hybrid"], time_weight=0.0) == PRESETS["hybrid-no-time"]


def test_the_session_the_phrase_points_at_rises_in_search(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=16))
    # The same purchase told in three sessions, five, twenty and sixty days before AT.
    for days in (5, 20, 60):
        mem.add(
            "u",
            [
                {"role": "user", "content": f"I bought a new kitchen gadget {'x' * (days // 5)}"},
                {"role": "assistant", "content": "Enjoy it"},
            ],
            session_id=f"d{days}",
            time=AT - timedelta(days=days),
            perspective="single",
        )

    def first(query: str, at: datetime, mode: str = "hybrid") -> str:
        return mem.search("u", query, k=3, mode=mode, at=at)[0].block.session_id

    assert first("What kitchen gadget did I buy three weeks ago?", AT) == "d20"
    assert first("What kitchen gadget did I buy two months ago?", AT) == "d60"
    assert first("What kitchen gadget did I buy a week ago?", AT) == "d5"
    # Read against another day, the same phrase points elsewhere: 15 days later, d5 is 20 days back.
    assert first("What kitchen gadget did I buy three weeks ago?", AT + 15 * DAY_) == "d5"
    # Without the time gain, the time asked changes nothing.
    query = "What kitchen gadget did I buy two months ago?"
    assert {first(query, at, "hybrid-no-time") for at in (AT, AT + 40 * DAY_, AT + 99 * DAY_)} == {"d5"}
    with pytest.raises(ValidationError, match="at"):
        mem.search("u", "kitchen gadget", at="not a time")
    mem.close()
