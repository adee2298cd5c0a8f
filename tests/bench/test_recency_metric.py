"""latest_first and latest@1 on hand-made rankings: does a ranking put the newest version of a fact first?"""

from __future__ import annotations

from datetime import UTC, datetime

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL
from memlane.bench.datasets.model import Sample
from memlane.bench.retrieval.metrics import LATEST_AT_1, LATEST_FIRST, recency_metrics, recency_scores

MARCH = datetime(2024, 3, 1, tzinfo=UTC)
JUNE = datetime(2024, 6, 1, tzinfo=UTC)
MAY = datetime(2024, 5, 1, tzinfo=UTC)
DATES: dict[str, datetime | None] = {"old": MARCH, "mid": MAY, "new": JUNE, "other": JUNE, "undated": None}


def test_newest_above_every_older_item() -> None:
    assert recency_scores(["new", "x", "old"], {"old", "new"}, DATES) == {LATEST_FIRST: 1.0, LATEST_AT_1: 1.0}
    # newest second overall but above the older evidence: first among the evidence, not first overall
    assert recency_scores(["x", "new", "old"], {"old", "new"}, DATES) == {LATEST_FIRST: 1.0, LATEST_AT_1: 0.0}
    assert recency_scores(["old", "new"], {"old", "new"}, DATES) == {LATEST_FIRST: 0.0, LATEST_AT_1: 0.0}
    # above one older item is not enough: it must beat every older one
    assert recency_scores(["mid", "new", "old"], {"old", "mid", "new"}, DATES)[LATEST_FIRST] == 0.0


def test_missing_items_rank_last() -> None:
    assert recency_scores(["new", "x"], {"old", "new"}, DATES)[LATEST_FIRST] == 1.0
    assert recency_scores(["old", "x"], {"old", "new"}, DATES) == {LATEST_FIRST: 0.0, LATEST_AT_1: 0.0}
    assert recency_scores([], {"old", "new"}, DATES) == {LATEST_FIRST: 0.0, LATEST_AT_1: 0.0}


def test_ties_at_the_newest_date_and_unscored_evidence() -> None:
    # two items share the newest date: either one first counts
    assert recency_scores(["other", "old", "new"], {"old", "new", "other"}, DATES)[LATEST_FIRST] == 1.0
    # one date only, or undated items: nothing newer to put first
    assert recency_scores(["new"], {"new", "other"}, DATES) == {}
    assert recency_scores(["new"], {"new", "undated"}, DATES) == {}
    assert recency_scores(["old"], {"old"}, DATES) == {}


def test_turn_level_dates_turns_by_their_session() -> None:
    dates = {"s_old": MARCH, "s_new": JUNE}
    scores = recency_metrics(
        ["s_old", "s_new"],
        ["s_new_1", "s_old_3", "s_old_1"],
        {"s_old", "s_new"},
        {"s_old_1", "s_new_1"},
        dates,
        lambda t: t.rsplit("_", 1)[0],
    )
    assert scores == {
        "session/latest_first": 0.0,
        "session/latest@1": 0.0,
        "turn/latest_first": 1.0,
        "turn/latest@1": 1.0,
    }


def _sample(turns: tuple[str, ...], sessions: tuple[str, ...], category: str = "knowledge-update") -> Sample:
    return Sample("q", "q", "?", "!", category, JUNE, sessions, turns, turns, False)


def test_families_add_the_figures_with_session_dates_only() -> None:
    sample = _sample(("a_1", "b_1"), ("a", "b"))
    dates = {"a": MARCH, "b": JUNE, "c": MAY}
    plain = LONGMEMEVAL.score(sample, ["b", "a", "c"], ["b_1", "a_1"], (1,))
    assert plain is not None and not any("latest" in m for m in plain)
    scored = LONGMEMEVAL.score(sample, ["b", "a", "c"], ["a_1", "b_1"], (1,), session_dates=dates)
    assert scored is not None
    assert (scored["session/latest_first"], scored["session/latest@1"]) == (1.0, 1.0)
    assert (scored["turn/latest_first"], scored["turn/latest@1"]) == (0.0, 0.0)
    locomo = Sample(
        "c:0",
        "c",
        "?",
        "!",
        "multi-hop",
        None,
        ("session_1", "session_2"),
        ("D1:1", "D2:4"),
        ("D1:1", "D2:4"),
        False,
        1,
    )
    ldates = {"session_1": MARCH, "session_2": JUNE}
    got = LOCOMO.score(locomo, ["session_2", "session_1"], ["D1:1", "D2:4"], (1,), session_dates=ldates)
    assert got is not None and got["session/latest@1"] == 1.0 and got["turn/latest_first"] == 0.0
