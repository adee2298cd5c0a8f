"""The context an answer prompt shows: retrieved memory blocks, or the whole history (full-context baseline).

Both render the same way, so the two baselines differ only in what they show::

    [1:56 pm on 8 May, 2023]
    Caroline: I went to a LGBTQ support group yesterday.
    Melanie: That's great!

    [...]

Retrieved blocks are shown in time order (by event time, then session and exchange), whatever their rank:
oldest first, or with ``newest_first`` newest first, so that where a fact was told again the newest version
is read first (LongMemEval's reader prompt, which states no order, reads them so; LoCoMo's prompts say
"oldest first"). Identical entries are shown once, since the perspectives of one exchange share its text in dual and
speakers mode. The full history is shown session by session, each with its date; over the token budget,
whole turns are dropped from the oldest on, and :class:`FullContext` records that it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memlane.bench.datasets.model import Haystack, Session
from memlane.bench.qa.tokens import DEFAULT_COUNTER, TokenCounter
from memlane.bench.retrieval.history import session_messages
from memlane.core.model import Hit, MemoryBlock
from memlane.core.timefmt import annotate, to_utc

if TYPE_CHECKING:
    # Only for annotations: the families import this package (its scorers and aggregates).
    from memlane.bench.datasets.families import Family
    from memlane.bench.systems import Hit as SystemHit

NO_CONTEXT = "(no memories)"
"""What the context reads when nothing was retrieved (or nothing fits the budget)."""
UNKNOWN_DATE = "unknown"
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """One dated piece of history: a memory block or (part of) a session. ``time`` orders entries."""

    time: datetime | None
    time_annotation: str
    text: str
    session_id: str = ""
    order: int = 0


def render_date(dt: datetime | None) -> str:
    """A question date as prompts show it: ``"11:07 pm on 10 April, 2023 (Monday)"``; ``"unknown"`` if None.

    The weekday is added because relative questions ("last Saturday") need it; it is computed in UTC,
    the zone every memlane time is read in.
    """
    if dt is None:
        return UNKNOWN_DATE
    return f"{annotate(dt)} ({_WEEKDAYS[to_utc(dt).weekday()]})"


def block_entry(block: MemoryBlock, *, facts: bool = False) -> ContextEntry:
    """A block as context: its raw exchange and, with ``facts``, the summary and facts extraction wrote."""
    text = block.message
    if facts and block.summary:
        text += f"\nSummary: {block.summary}"
    if facts and block.contexts:
        text += "\nFacts:\n" + "\n".join(f"- {fact}" for fact in block.contexts)
    return ContextEntry(block.event_time, block.time_annotation, text, block.session_id, block.exchange_index)


def retrieved_entries(
    results: Sequence[Hit | MemoryBlock], *, facts: bool = False, newest_first: bool = False
) -> list[ContextEntry]:
    """Retrieved blocks (hits or blocks, in rank order) as entries in chronological order (``newest_first``:
    reversed), duplicates once."""
    entries: list[ContextEntry] = []
    seen: set[tuple[str, int, str]] = set()
    for result in results:
        entry = block_entry(result.block if isinstance(result, Hit) else result, facts=facts)
        key = (entry.session_id, entry.order, entry.text)
        if key not in seen:
            seen.add(key)
            entries.append(entry)
    # Blocks always carry an event time; the fallback only keeps the sort total.
    ordered = sorted(entries, key=lambda e: (e.time or datetime.min, e.session_id, e.order))
    return _newest_first(ordered) if newest_first else ordered


def _newest_first(entries: list[ContextEntry]) -> list[ContextEntry]:
    """Chronological entries with their times reversed, the exchanges of one time still in their order."""
    times: dict[tuple[datetime | None, str], list[ContextEntry]] = {}
    for e in entries:
        times.setdefault((e.time, e.session_id), []).append(e)
    return [e for group in reversed(times.values()) for e in group]


def system_entries(hits: Sequence[SystemHit], haystack: Haystack, *, newest_first: bool = False) -> list[ContextEntry]:
    """A system's items (rank order) as entries: each item's text under its session's date, oldest first
    (``newest_first``: newest first), identical texts of one session once (the same order and rendering as
    memlane's blocks)."""
    dates = {s.session_id: s.started_at for s in haystack.sessions}
    entries: list[ContextEntry] = []
    seen: set[tuple[str, str]] = set()
    for rank, hit in enumerate(hits):
        if (hit.session_id, hit.text) in seen:
            continue
        seen.add((hit.session_id, hit.text))
        when = dates.get(hit.session_id)
        entries.append(ContextEntry(when, annotate(when) if when else UNKNOWN_DATE, hit.text, hit.session_id, rank))
    ordered = sorted(entries, key=lambda e: (e.time or datetime.min.replace(tzinfo=UTC), e.session_id, e.order))
    return _newest_first(ordered) if newest_first else ordered


def render_context(entries: Sequence[ContextEntry]) -> str:
    """Entries in the given order, each under its time annotation in brackets, separated by blank lines."""
    if not entries:
        return NO_CONTEXT
    return "\n\n".join(f"[{e.time_annotation}]\n{e.text}" for e in entries)


@dataclass(frozen=True)
class FullContext:
    """The history as the full-context baseline shows it, and what the budget cut.

    ``tokens`` is the rendered context's size by ``counter``; ``truncated`` is true when turns were dropped
    to fit ``budget``; ``kept_turns`` of ``total_turns`` remain (the newest ones); ``after_question``
    counts sessions left out because they start after the question date.
    """

    entries: tuple[ContextEntry, ...]
    text: str
    tokens: int
    counter: str
    budget: int
    truncated: bool
    total_turns: int
    kept_turns: int
    after_question: int

    def to_json(self) -> dict[str, object]:
        """Everything but the text and entries: what a run log records about the context."""
        return {
            "tokens": self.tokens,
            "counter": self.counter,
            "budget": self.budget,
            "truncated": self.truncated,
            "total_turns": self.total_turns,
            "kept_turns": self.kept_turns,
            "after_question": self.after_question,
        }


def _session_lines(sessions: Sequence[Session], family: Family, namespace: str) -> list[tuple[Session, list[str]]]:
    out: list[tuple[Session, list[str]]] = []
    for session in sessions:
        # The same text the bench store ingested (image captions, empty turns dropped, oversized cut).
        messages, _ = session_messages(session, family, f"{namespace}/{session.session_id}")
        out.append((session, [f"{m['role']}: {m['content']}" for m in messages]))
    return out


def _entries(lines: list[tuple[Session, list[str]]], drop: int) -> list[ContextEntry]:
    entries: list[ContextEntry] = []
    for session, turns in lines:
        if drop >= len(turns):
            drop -= len(turns)
            continue
        kept, drop = turns[drop:], 0
        label = annotate(session.started_at) if session.started_at else f"date {UNKNOWN_DATE}"
        entries.append(ContextEntry(session.started_at, label, "\n".join(kept), session.session_id))
    return entries


def full_context(
    haystack: Haystack,
    family: Family,
    *,
    budget: int,
    before: datetime | None = None,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> FullContext:
    """The whole history of ``haystack`` (sessions in haystack order) within ``budget`` tokens.

    ``family`` says how turns become text, as at ingest. Sessions that start
    after ``before`` (the question date) are left out. The fewest oldest turns are dropped that make the
    rendered context fit (binary search: the size only shrinks as turns go).
    """
    if budget < 0:
        raise ValueError("budget must be >= 0")
    cutoff = to_utc(before) if before is not None else None
    shown = [s for s in haystack.sessions if cutoff is None or s.started_at is None or s.started_at <= cutoff]
    lines = _session_lines(shown, family, haystack.namespace)
    total = sum(len(turns) for _, turns in lines)

    def size(drop: int) -> int:
        return counter.count(render_context(_entries(lines, drop)))

    low, high = 0, total
    if size(0) > budget:
        while low < high:
            middle = (low + high) // 2
            if size(middle) <= budget:
                high = middle
            else:
                low = middle + 1
    entries = _entries(lines, low)
    text = render_context(entries)
    return FullContext(
        entries=tuple(entries),
        text=text,
        tokens=counter.count(text),
        counter=counter.name,
        budget=budget,
        truncated=low > 0,
        total_turns=total,
        kept_turns=total - low,
        after_question=len(haystack.sessions) - len(shown),
    )


def history_end(haystack: Haystack) -> datetime | None:
    """The latest session date: the question date to use where the data set gives none (LoCoMo)."""
    dates = [s.started_at for s in haystack.sessions if s.started_at is not None]
    return max(dates) if dates else None
