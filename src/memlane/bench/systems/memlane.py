"""memlane itself as a system under test: one search preset over a Memory.

In a retrieval run the Memory is the run's ingest-once bench store (:mod:`memlane.bench.retrieval.ingest`),
already holding every namespace: ``ingest`` and ``reset`` then do nothing (the store is kept for the next
run). Built on its own (``prebuilt=False``: tests, QA) it ingests with the same add requests as the bench
store (:func:`memlane.bench.retrieval.history.haystack_requests`) and ``reset`` deletes the user.

A hit is a memory block: its ``message_ids`` are the data set's turn ids, its session the block's session.
``--system memlane`` is the ``hybrid`` preset; ``--system memlane:mode=vector`` another preset. Search is
``Memory.search(user, query, depth, mode=..., at=question date, distinct=False)``, the same call a
``--mode`` run makes, so ``--system memlane:mode=M`` and ``--mode M`` give the same rankings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING

from memlane.bench.datasets.model import Haystack, Session
from memlane.bench.retrieval.history import haystack_requests
from memlane.bench.systems import Hit, SystemContext, flag, take_options
from memlane.core.errors import ConfigError
from memlane.core.memory import Memory
from memlane.core.model import PerspectiveMode
from memlane.core.retrieval import resolve_settings

if TYPE_CHECKING:
    from memlane.bench.datasets.families import Family

DEFAULT_PRESET = "hybrid"


def end_of_day(dt: datetime) -> datetime | None:
    """The start of the next day: the exclusive bound of "before the end of the question's day". None
    (no bound) on the last day a time can have, 31 December 9999, whose next day does not exist."""
    start = dt.replace(hour=0, minute=0, second=0, microsecond=0)
    return None if start.date() == date.max else start + timedelta(days=1)


class MemlaneSystem:
    """memlane's search in one preset (see the module doc)."""

    name = "memlane"
    ranks_turns = True
    cuts_rankings = False

    def __init__(
        self,
        mem: Memory,
        mode: str = DEFAULT_PRESET,
        *,
        family: Family | None = None,
        perspective: PerspectiveMode | None = None,
        before_question_date: bool = False,
        prebuilt: bool = True,
        depth: int | None = None,
    ) -> None:
        resolve_settings(mode)  # an unknown preset fails here, with the known ones
        self.mem = mem
        self.mode = mode
        self.family = family
        self.perspective = perspective
        self.before_question_date = before_question_date
        self.prebuilt = prebuilt
        self.depth = depth
        self.version = package_version("memlane")

    def settings(self) -> dict[str, object]:
        s = resolve_settings(self.mode)
        out: dict[str, object] = {"system": self.name, "version": self.version, "mode": self.mode}
        candidates = s.candidates if self.depth is None else max(s.candidates, self.depth)
        return out | s.to_json() | {"candidates": candidates}

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        if self.prebuilt:
            return
        if self.family is None or self.perspective is None:
            raise ConfigError("a memlane system built to ingest needs its family and perspective")
        requests, _ = haystack_requests(Haystack(user, tuple(sessions), ()), self.family, self.perspective)
        self.mem.add_many(requests)

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        before = end_of_day(at) if self.before_question_date and at is not None else None
        hits = self.mem.search(user, query, k, mode=self.mode, before=before, at=at, distinct=False)
        return [Hit(h.block.id, h.score, h.block.session_id, h.block.message_ids, h.block.message) for h in hits]

    def reset(self, user: str) -> None:
        if not self.prebuilt:
            self.mem.delete_user(user)

    def close(self) -> None:
        """The Memory belongs to whoever opened it."""


def factory(options: Mapping[str, str], context: SystemContext) -> MemlaneSystem:
    """``--system memlane[:mode=PRESET,before_question_date=false]`` on the run's bench store."""
    opts = take_options("memlane", options, ("mode", "before_question_date"))
    mem = context.extras.get("memory")
    if not isinstance(mem, Memory):
        raise ConfigError("the memlane system needs the run's Memory (context.extras['memory'])")
    before = flag("memlane", "before_question_date", opts.get("before_question_date"), False)
    return MemlaneSystem(
        mem,
        opts.get("mode", DEFAULT_PRESET),
        before_question_date=before,
        depth=context.depth,
    )
