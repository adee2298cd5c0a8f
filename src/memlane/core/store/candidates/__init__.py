"""What a search reads: each retriever's top blocks, the session-words counts, the blocks' positions, all of it in
one call (:meth:`gather`), and the approximate vector index behind the vector retriever.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from typing import Protocol

from memlane.core.store.candidates.annsettings import IndexStatus
from memlane.core.store.candidates.gather import Gather, Gathered, StepwiseStore


class Candidates(StepwiseStore, Protocol):
    """What a search reads: each retriever's top blocks, the session-words counts, the blocks' positions, all of
    it in one call (:meth:`gather`), and the approximate vector index behind the vector retriever."""

    def gather(self, user: str, ask: Gather) -> Gathered:
        """Everything one search reads (:class:`memlane.core.store.candidates.gather.Gather`) in one call: what
        :func:`memlane.core.store.candidates.gather.gather_stepwise` reads through the stepwise methods
        (:class:`memlane.core.store.candidates.gather.StepwiseStore`), and the same."""
        ...

    def build_index(self, user: str) -> IndexStatus:
        """Build the user's approximate vector index now, in this thread, or bring it up to date, if the
        user is at or past the store's threshold (``AnnSettings``); NotFoundError for an unknown user."""
        ...

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: every user, by name) stands."""
        ...
