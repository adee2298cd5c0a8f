"""The harness's baseline retrievers (:mod:`memlane.bench.retrieval.baselines`) as systems under test.

``ingest`` builds nothing: a :class:`~memlane.bench.retrieval.baselines.HaystackRanker` over the user's
sessions indexes lazily on the first question, and baselines of one run share it (an RRF baseline reuses
its parts' rankings). A hit is a ranked unit (session, round or turn) with the target turns it stands for;
session baselines rank no turns (``ranks_turns`` False). Their rankings keep at most the contract length
(``cuts_rankings``), as before baselines were systems: the exported files are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib.metadata import version as package_version

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.model import Haystack, Session
from memlane.bench.retrieval.baselines import BASELINES, Baseline, HaystackRanker, TermCache
from memlane.bench.retrieval.bm25 import Vocabulary
from memlane.bench.systems import Hit, SystemContext, take_options
from memlane.core.embedding.protocol import CachedEmbedder
from memlane.core.errors import ConfigError, ValidationError


class SharedRankers:
    """One :class:`HaystackRanker` per user, shared by every baseline system of a run."""

    def __init__(self, family: Family, embedder: CachedEmbedder | None) -> None:
        self.family = family
        self.embedder = embedder
        self.terms = TermCache(Vocabulary())
        self._rankers: dict[str, HaystackRanker] = {}

    def open(self, user: str, sessions: Sequence[Session]) -> HaystackRanker:
        ranker = self._rankers.get(user)
        if ranker is None or ranker.haystack.sessions != tuple(sessions):
            ranker = HaystackRanker(Haystack(user, tuple(sessions), ()), self.family, self.terms, self.embedder)
            self._rankers[user] = ranker
        return ranker

    def get(self, user: str) -> HaystackRanker:
        ranker = self._rankers.get(user)
        if ranker is None:
            raise ConfigError(f"baseline: nothing ingested for {user!r}")
        return ranker

    def drop(self, user: str) -> None:
        self._rankers.pop(user, None)


class BaselineSystem:
    """One baseline retriever (see the module doc)."""

    name = "baseline"
    cuts_rankings = True

    def __init__(self, baseline: Baseline, rankers: SharedRankers) -> None:
        if rankers.family not in baseline.families:
            raise ConfigError(f"baseline {baseline.name!r} does not apply to {rankers.family.name}")
        self.baseline = baseline
        self.rankers = rankers
        self.ranks_turns = baseline.unit != "session"
        self.version = package_version("memlane")

    def settings(self) -> dict[str, object]:
        return self.baseline.settings()

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        self.rankers.open(user, sessions)

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        """Every unit the baseline retrieves (the whole ranking, more than ``k``: see the protocol)."""
        ranker = self.rankers.get(user)
        ranking = ranker.rank(self.baseline, query)
        units = {u.unit_id: u for u in ranker.units(self.baseline.unit, self.baseline.session_text)}
        return [
            Hit(unit_id, score, units[unit_id].session_id, units[unit_id].turn_ids, units[unit_id].text)
            for unit_id, score in zip(ranking.ids, ranking.scores, strict=True)
        ]

    def reset(self, user: str) -> None:
        self.rankers.drop(user)

    def close(self) -> None:
        """Nothing held outside memory."""


def factory(options: Mapping[str, str], context: SystemContext) -> BaselineSystem:
    """``--system baseline:name=bm25-sessions`` (names: docs/bench/baselines.md)."""
    opts = take_options("baseline", options, ("name",))
    name = opts.get("name")
    if name is None or name not in BASELINES:
        raise ValidationError(f"system 'baseline': name= must be one of {', '.join(BASELINES)}, got {name!r}")
    shared = context.extras.get("baseline_rankers")
    rankers = shared if isinstance(shared, SharedRankers) else SharedRankers(context.family, context.embedder)
    return BaselineSystem(BASELINES[name], rankers)
