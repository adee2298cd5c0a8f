"""What checking a store's integrity found: the checks that ran, the problems, and what could not be checked.

``Store.check(quick=True)`` is cheap enough to run on a schedule (the HTTP service's health does); the full
check (``memlane check``) reads everything: SQLite's integrity check and memlane's own index checks, or on
PostgreSQL memlane's cross-table checks and, where the ``amcheck`` extension is installed, its checks of
every B-tree index and table of the store.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoreCheck:
    """``ran``: the checks run, in words; ``problems``: what they found (empty: healthy); ``notes``: what
    was not checked and why (an extension that is not installed, checksums that are off)."""

    ran: tuple[str, ...]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def __add__(self, other: StoreCheck) -> StoreCheck:
        return StoreCheck(self.ran + other.ran, self.problems + other.problems, self.notes + other.notes)

    def prefixed(self, prefix: str) -> StoreCheck:
        """Every line of this check with ``prefix`` in front (a shard's number)."""
        return StoreCheck(
            tuple(prefix + r for r in self.ran),
            tuple(prefix + p for p in self.problems),
            tuple(prefix + n for n in self.notes),
        )
