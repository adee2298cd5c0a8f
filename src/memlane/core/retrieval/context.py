"""Context rescoring: a block borrows evidence from its context (its session's best blocks, its neighbouring
exchanges, its session's rank by people's words, the query's time phrases), using only what the user's
memory holds (session ids, exchange order, event times), never anything about the question set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memlane.core.retrieval.settings import SearchSettings
from memlane.core.time_phrases import TimeWindow


@dataclass(frozen=True, slots=True)
class Position:
    """Where a block sits in the user's history: its session, its exchange's index in the session and its
    event time (epoch seconds; None where the caller did not read it)."""

    session: str
    exchange: int
    time: float | None = None


def rescore(
    scores: Mapping[int, float],
    positions: Mapping[int, Position],
    settings: SearchSettings,
    word_ranks: Mapping[str, int] | None = None,
    windows: Sequence[TimeWindow] = (),
) -> dict[int, float]:
    """Add session, neighbour, session-words and time context to fused scores (see :class:`SearchSettings`);
    ``word_ranks`` holds the candidates' sessions' ranks by people's words
    (:func:`memlane.core.ranking.session_words.session_word_ranks`), needed when ``settings.words_weight``
    > 0; ``windows`` the query's time windows (:func:`memlane.core.time_phrases.time_windows`), read when
    ``settings.time_weight`` > 0 against the positions' event times.

    Context is computed from the *fused* scores of the candidates only, so a block's gain never depends on
    another block's gain, and the result does not depend on the order of ``scores``. Blocks without a
    position keep their score.
    """
    if not settings.uses_context:
        return dict(scores)
    context = Context(scores, positions, settings, word_ranks, windows)
    out: dict[int, float] = {}
    for ref, score in scores.items():
        pos = positions.get(ref)
        if pos is None:
            out[ref] = score
            continue
        session, near, words, time = context.gains(pos)
        out[ref] = score + (((session + near) + words) + time)
    return out


class Context:
    """The candidates' context, read once: each session's best fused scores, each exchange's best, the
    sessions' ranks by people's words and the query's time windows; :meth:`gains` is one block's share."""

    def __init__(
        self,
        scores: Mapping[int, float],
        positions: Mapping[int, Position],
        settings: SearchSettings,
        word_ranks: Mapping[str, int] | None = None,
        windows: Sequence[TimeWindow] = (),
    ) -> None:
        self.settings = settings
        self.ranks = word_ranks or {}
        self.windows = windows
        best = max(scores.values(), default=0.0)
        self.words_unit = settings.words_weight * best * (settings.words_k + 1)
        self.time_gain = settings.time_weight * best if windows else 0.0
        by_session: dict[str, list[float]] = {}
        self.by_exchange: dict[tuple[str, int], float] = {}
        for ref, score in scores.items():
            pos = positions.get(ref)
            if pos is None:
                continue
            by_session.setdefault(pos.session, []).append(score)
            key = (pos.session, pos.exchange)
            self.by_exchange[key] = max(self.by_exchange.get(key, 0.0), score)
        top = settings.session_top
        self.session_gain = {s: sum(sorted(v, reverse=True)[:top]) for s, v in by_session.items()}

    def gains(self, pos: Position) -> tuple[float, float, float, float]:
        """The session, neighbour, session-words and time gains of a block at ``pos`` (0.0 where a gain is
        off or does not apply); :func:`rescore` adds them to the fused score in that order."""
        settings = self.settings
        session = settings.session_weight * self.session_gain[pos.session]
        near = 0.0
        if settings.neighbour_weight > 0:
            for d in range(1, settings.neighbour_span + 1):
                near = max(near, self.by_exchange.get((pos.session, pos.exchange - d), 0.0))
                near = max(near, self.by_exchange.get((pos.session, pos.exchange + d), 0.0))
            near = settings.neighbour_weight * near
        words = 0.0
        if self.words_unit > 0 and pos.session in self.ranks:
            words = self.words_unit / (settings.words_k + self.ranks[pos.session])
        time = 0.0
        if self.time_gain > 0 and pos.time is not None and any(w.holds(pos.time) for w in self.windows):
            time = self.time_gain
        return session, near, words, time

    def matched(self, pos: Position) -> tuple[str, ...]:
        """The query's time phrases whose window holds the block's event time."""
        if pos.time is None:
            return ()
        return tuple(dict.fromkeys(w.phrase for w in self.windows if w.holds(pos.time)))
