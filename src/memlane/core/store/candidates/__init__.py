"""What a search reads: each retriever's top blocks, the session-words counts, the blocks' positions, all of it in
one call (:meth:`gather`), and the approximate vector index behind the vector retriever.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import Filters
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.candidates.annsettings import IndexStatus
from memlane.core.store.candidates.gather import Gather, Gathered


class Candidates(Protocol):
    """What a search reads: each retriever's top blocks, the session-words counts, the blocks' positions, all of
    it in one call (:meth:`gather`), and the approximate vector index behind the vector retriever."""

    def vector_candidates(
        self,
        user: str,
        query: Vectors,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        """The user's top ``k`` blocks by their best key's cosine. ``kinds`` are search-key kinds
        (message, summary, fact). ``filters`` (their pre-cut rules: :attr:`Filters.pre`) restrict the pool
        before the cut, exactly (the ANN path falls back to exact scoring when the pool is too small for
        it); blocks expired at ``now`` (None: the current time) are never candidates."""
        ...

    def keyword_candidates(
        self,
        user: str,
        query: str,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
        k1: float = BM25_K1,
        b: float = BM25_B,
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        """The user's top ``k`` blocks by BM25 (the user's own statistics, unchanged by filters), with
        ``filters`` and ``now`` as in :meth:`vector_candidates`."""
        ...

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """What the session-words ranking needs (:class:`memlane.core.ranking.session_words.SessionWordCounts`)
        for ``query`` in the user's sessions' people's words (what the people in the conversation said:
        :func:`memlane.core.ranking.session_words.people_words`), with the user's own statistics: the query
        terms' counts per session, the sessions' lengths, their number and mean length, and the rows of those
        of ``sessions`` (ids) the user has. None when nothing can match (no query term, no session)."""
        ...

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time in epoch seconds) of the user's blocks by reference: what
        context rescoring reads."""
        ...

    def gather(self, user: str, ask: Gather) -> Gathered:
        """Everything one search reads (:class:`memlane.core.store.candidates.gather.Gather`) in one call: what
        :func:`memlane.core.store.candidates.gather.gather_stepwise` reads through the methods above, and the same."""
        ...

    def build_index(self, user: str) -> IndexStatus:
        """Build the user's approximate vector index now, in this thread, or bring it up to date, if the
        user is at or past the store's threshold (``AnnSettings``); NotFoundError for an unknown user."""
        ...

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: every user, by name) stands."""
        ...
