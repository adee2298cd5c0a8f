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
    ranks = word_ranks or {}
    best = max(scores.values(), default=0.0)
    words_unit = settings.words_weight * best * (settings.words_k + 1)
    time_gain = settings.time_weight * best if windows else 0.0
    by_session: dict[str, list[float]] = {}
    by_exchange: dict[tuple[str, int], float] = {}
    for ref, score in scores.items():
        pos = positions.get(ref)
        if pos is None:
            continue
        by_session.setdefault(pos.session, []).append(score)
        key = (pos.session, pos.exchange)
        by_exchange[key] = max(by_exchange.get(key, 0.0), score)
    session_gain = {s: sum(sorted(v, reverse=True)[: settings.session_top]) for s, v in by_session.items()}
    out: dict[int, float] = {}
    for ref, score in scores.items():
        pos = positions.get(ref)
        if pos is None:
            out[ref] = score
            continue
        gain = settings.session_weight * session_gain[pos.session]
        if settings.neighbour_weight > 0:
            near = 0.0
            for d in range(1, settings.neighbour_span + 1):
                near = max(near, by_exchange.get((pos.session, pos.exchange - d), 0.0))
                near = max(near, by_exchange.get((pos.session, pos.exchange + d), 0.0))
            gain += settings.neighbour_weight * near
        if words_unit > 0 and pos.session in ranks:
            gain += words_unit / (settings.words_k + ranks[pos.session])
        if time_gain > 0 and pos.time is not None and any(w.holds(pos.time) for w in windows):
            gain += time_gain
        out[ref] = score + gain
    return out
