"""Which of a user's blocks a retriever ranks (:class:`Scope`): what the vector and keyword retrievers of
every store take (:class:`memlane.core.store.candidates.gather.StepwiseStore`), stated once."""

from __future__ import annotations

from dataclasses import dataclass

from memlane.core.model import Filters


@dataclass(frozen=True, slots=True)
class Scope:
    """The blocks a retriever may rank, and the keys of them it scores.

    * ``kinds``: the search-key kinds scored (``message``, ``summary``, ``fact``); None: every kind.
    * ``after``, ``before``: event times in [``after``, ``before``) (epoch seconds); None: unbounded.
    * ``filters``: the blocks kept by their pre-cut rules (:attr:`memlane.core.model.Filters.pre`), applied
      before the top-k cut, exactly; None: every block.
    * ``now``: the time (epoch seconds) expiry is read at; blocks expired then are never candidates.
      None: the current time.
    """

    kinds: frozenset[str] | None = None
    after: float | None = None
    before: float | None = None
    filters: Filters | None = None
    now: float | None = None


EVERY_BLOCK = Scope()
"""Every live block of the user, every key kind: the default scope."""
