"""The full-context baseline: the whole history up to a budget, oldest turns dropped first, and recorded."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL
from memlane.bench.datasets.model import Haystack, Session, Turn
from memlane.bench.qa.context import full_context, history_end
from memlane.bench.qa.tokens import CharsPerToken

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
JUNE_1 = datetime(2023, 6, 1, 9, 5, tzinfo=UTC)
JULY_4 = datetime(2023, 7, 4, 18, 30, tzinfo=UTC)
CHARS = CharsPerToken(1)  # one token per character, so budgets are easy to compute by hand

FULL = (
    "[1:56 pm on 8 May, 2023]\nuser: A1\nassistant: B1\n\n"
    "[9:05 am on 1 June, 2023]\nuser: A2\nassistant: B2\n\n"
    "[6:30 pm on 4 July, 2023]\nuser: A3\nassistant: B3"
)


def session(sid: str, when: datetime | None, n: int) -> Session:
    turns = (Turn(f"{sid}_1", "user", f"A{n}"), Turn(f"{sid}_2", "assistant", f"B{n}"))
    return Session(sid, when, turns)


HAYSTACK = Haystack("q1", (session("s1", MAY_8, 1), session("s2", JUNE_1, 2), session("s3", JULY_4, 3)), ())


def test_everything_fits() -> None:
    ctx = full_context(HAYSTACK, LONGMEMEVAL, budget=10_000, counter=CHARS)
    assert ctx.text == FULL
    assert (ctx.tokens, ctx.truncated, ctx.kept_turns, ctx.total_turns) == (len(FULL), False, 6, 6)
    assert [e.session_id for e in ctx.entries] == ["s1", "s2", "s3"]


def test_oldest_turns_are_dropped_first_and_recorded() -> None:
    tail = "[9:05 am on 1 June, 2023]\nassistant: B2\n\n[6:30 pm on 4 July, 2023]\nuser: A3\nassistant: B3"
    ctx = full_context(HAYSTACK, LONGMEMEVAL, budget=len(tail), counter=CHARS)
    assert ctx.text == tail
    assert (ctx.truncated, ctx.kept_turns, ctx.tokens, ctx.budget) == (True, 3, len(tail), len(tail))
    # One character less and the next-oldest turn goes too (the newest session stays whole).
    tighter = full_context(HAYSTACK, LONGMEMEVAL, budget=len(tail) - 1, counter=CHARS)
    assert tighter.text == "[6:30 pm on 4 July, 2023]\nuser: A3\nassistant: B3"
    assert tighter.kept_turns == 2
    assert tighter.to_json()["truncated"] is True


def test_a_budget_below_one_turn_keeps_nothing() -> None:
    ctx = full_context(HAYSTACK, LONGMEMEVAL, budget=5, counter=CHARS)
    assert (ctx.kept_turns, ctx.entries, ctx.truncated) == (0, (), True)


def test_sessions_after_the_question_are_left_out() -> None:
    ctx = full_context(HAYSTACK, LONGMEMEVAL, budget=10_000, before=JUNE_1, counter=CHARS)
    assert [e.session_id for e in ctx.entries] == ["s1", "s2"]
    assert (ctx.after_question, ctx.total_turns, ctx.truncated) == (1, 4, False)


def test_locomo_turns_show_speaker_and_image_caption() -> None:
    turns = (
        Turn("D1:1", "Caroline", "Look!", image_caption="a photo of a dog"),
        Turn("D1:2", "Melanie", "Cute"),
        Turn("D1:3", "Melanie", "  "),  # empty turns are dropped, as at ingest
    )
    haystack = Haystack("conv-26", (Session("session_1", None, turns),), ())
    ctx = full_context(haystack, LOCOMO, budget=10_000)
    assert ctx.text == "[date unknown]\nCaroline: Look! and shared a photo of a dog.\nMelanie: Cute"
    assert ctx.total_turns == 2
    assert ctx.counter == "approx-chars/4"


def test_history_end_and_bad_budget() -> None:
    assert history_end(HAYSTACK) == JULY_4
    with pytest.raises(ValueError):
        full_context(HAYSTACK, LONGMEMEVAL, budget=-1)
