"""What one search asks of a store (:class:`Gather`) and what it gets back (:class:`Gathered`), in one call.

A search reads each retriever's candidates, then, for context rescoring, the candidates' places and their
sessions' counts of the query's words (:func:`memlane.core.retrieval.pipeline.collect`). A store whose
every read is a round trip to another machine (PostgreSQL on Citus, where each one crosses the coordinator)
answers the whole of it at once (``Store.gather``); a store that reads in process answers it step by step,
with the same methods a caller can use one at a time (:func:`gather_stepwise`). Either way the answer is
the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.candidates.scope import EVERY_BLOCK, Scope

Ranked = list[tuple[int, float]]


@dataclass(frozen=True)
class Gather:
    """One search's reads: the vector retriever's top ``k`` blocks for ``vector`` (None: no vector
    retriever), the keyword retriever's for ``query`` (``keyword``), both within ``scope``, the keyword
    retriever's with BM25's ``k1`` and ``b``; with ``context`` the places of every candidate, and with
    ``words`` too, their sessions' counts of the query's words."""

    query: str
    vector: Vectors | None
    keyword: bool
    k: int
    scope: Scope = EVERY_BLOCK
    k1: float = BM25_K1
    b: float = BM25_B
    context: bool = False
    words: bool = False


@dataclass(frozen=True)
class Gathered:
    """What a :class:`Gather` found: each retriever's (block reference, score) list, best first
    (``vector`` first, then ``keyword``, each only if asked), the candidates' (session, exchange index,
    event time) when ``context`` was asked, and their sessions' word counts when ``words`` was (None: no
    session holds a query word)."""

    rankings: dict[str, Ranked]
    positions: dict[int, tuple[str, int, float]]
    word_counts: SessionWordCounts | None


class StepwiseStore(Protocol):
    """The reads a search makes one at a time (:func:`gather_stepwise`), part of every store's
    :class:`memlane.core.store.candidates.Candidates`."""

    def vector_candidates(self, user: str, query: Vectors, k: int, scope: Scope = EVERY_BLOCK) -> Ranked:
        """The user's top ``k`` blocks of ``scope`` (:class:`memlane.core.store.candidates.scope.Scope`) by
        their best key's cosine. The scope's filters restrict the pool before the cut, exactly (the ANN path
        falls back to exact scoring when the pool is too small for it)."""
        ...

    def keyword_candidates(
        self, user: str, query: str, k: int, scope: Scope = EVERY_BLOCK, *, k1: float = BM25_K1, b: float = BM25_B
    ) -> Ranked:
        """The user's top ``k`` blocks of ``scope`` by BM25 with ``k1`` and ``b`` (the user's own statistics,
        unchanged by the scope)."""
        ...

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time in epoch seconds) of the user's blocks by reference: what
        context rescoring reads."""
        ...

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """What the session-words ranking needs (:class:`memlane.core.ranking.session_words.SessionWordCounts`)
        for ``query`` in the user's sessions' people's words (what the people in the conversation said:
        :func:`memlane.core.ranking.session_words.people_words`), with the user's own statistics: the query
        terms' counts per session, the sessions' lengths, their number and mean length, and the rows of those
        of ``sessions`` (ids) the user has. None when nothing can match (no query term, no session)."""
        ...


def gather_stepwise(store: StepwiseStore, user: str, ask: Gather) -> Gathered:
    """``ask`` answered by one call per read: each retriever, then the candidates' places, then their
    sessions' word counts."""
    rankings: dict[str, Ranked] = {}
    if ask.vector is not None:
        rankings["vector"] = store.vector_candidates(user, ask.vector, ask.k, ask.scope)
    if ask.keyword:
        rankings["keyword"] = store.keyword_candidates(user, ask.query, ask.k, ask.scope, k1=ask.k1, b=ask.b)
    positions: dict[int, tuple[str, int, float]] = {}
    if ask.context:
        # Context reads every candidate's session and place, not its text.
        refs = list(dict.fromkeys(ref for ranked in rankings.values() for ref, _ in ranked))
        positions = store.block_positions(user, refs) if refs else {}
    counts = None
    if ask.words and positions:
        counts = store.session_word_counts(user, ask.query, sorted({p[0] for p in positions.values()}))
    return Gathered(rankings, positions, counts)
