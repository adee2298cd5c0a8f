"""One search in the order it runs, written once: :func:`collect` the candidates, :func:`order` them (rank,
then supersession), then the :func:`hits`.

:func:`search` is what ``Memory.search`` runs once its input is checked. The order is its own stage so that
``memlane bench tune`` and the supersession cross-validation can collect a question's candidates once and
order them again under every setting they try, with the code a search runs: the same :func:`order`, fed
what supersession reads of the candidates from what was collected (:class:`Known`) instead of from the
store as the search goes (:class:`FromStore`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from memlane.core.embedding.protocol import Embedder, EmbeddingCache
from memlane.core.model import Filters, Hit, MemoryBlock
from memlane.core.retrieval.fusion import Scored
from memlane.core.retrieval.pipeline import Candidates, collect, explainer, hits, rank, with_supersedes
from memlane.core.retrieval.settings import SearchSettings, score_kind, with_candidates
from memlane.core.retrieval.statements import Version, version_of
from memlane.core.retrieval.supersession import VectorReader, applies, cache_reader, supersede, versions_of
from memlane.core.store.protocol import Store
from memlane.core.timefmt import now_utc, to_epoch


@dataclass(frozen=True)
class Known:
    """What supersession reads of a query's candidates: their ``blocks`` (by reference; at least the first
    ``supersede_depth`` ranked), each one's :class:`Version`, and where to read the vectors a version lacks
    (``vectors``; none: the versions hold theirs)."""

    blocks: Mapping[int, MemoryBlock]
    versions: Mapping[int, Version]
    vectors: VectorReader | None = None

    @classmethod
    def of(cls, store: Store, cache: EmbeddingCache, model_id: str, user: str, candidates: Candidates) -> Known:
        """Every candidate's block and version (with its vectors from ``cache``, those of ``model_id``), read
        once: for callers that order the same candidates under many settings. ``candidates`` must have been
        collected with their places (``all_context``), which name every candidate."""
        blocks = store.fetch_blocks(user, sorted(candidates.positions))
        return cls(blocks, versions_of(cache, model_id, blocks))

    def read(self, ranked: Scored, settings: SearchSettings) -> Known:
        """Read beforehand: the same whatever the ranking."""
        return self


class Versions(Protocol):
    """Where :func:`order` reads what supersession needs of the ranked candidates, only when it applies."""

    def read(self, ranked: Scored, settings: SearchSettings) -> Known: ...


@dataclass(frozen=True)
class FromStore:
    """Supersession's reads as one search goes: the blocks of the first ``supersede_depth`` of the ranking,
    and of at least its first ``fetch`` in the same read (what :func:`hits` reads first: supersession only
    reorders within its depth, so the first blocks stay the first blocks); the vectors from the embedding
    cache the memory's embedder writes (``cache``, those of ``model_id``), read only for the pairs that pass
    every other test."""

    store: Store
    cache: EmbeddingCache
    model_id: str
    user: str
    fetch: int = 0

    def read(self, ranked: Scored, settings: SearchSettings) -> Known:
        depth = settings.supersede_depth
        blocks = self.store.fetch_blocks(self.user, [ref for ref, _, _ in ranked[: max(depth, self.fetch)]])
        words = settings.supersede_terms > 0  # a block's words are read for the terms test alone
        versions = {ref: version_of(blocks[ref], words=words) for ref, _, _ in ranked[:depth] if ref in blocks}
        return Known(blocks, versions, cache_reader(self.cache, self.model_id))


@dataclass(frozen=True)
class Order:
    """The candidates in their final order (``ranked``), the same before supersession (``unmoved``), each
    superseded reference's newer versions (``newer``, references, newest first) and the blocks supersession
    read (``blocks``: none when it did not apply)."""

    ranked: Scored
    unmoved: Scored
    newer: dict[int, tuple[int, ...]] = field(default_factory=dict)
    blocks: Mapping[int, MemoryBlock] = field(default_factory=dict)


def asked_at(at: datetime | None) -> tuple[datetime, float | None]:
    """When a question is asked (``at``, default now: its time phrases are read against it) and the time it
    asks about (epoch seconds; None: now). "Newest" is read as of ``at``: a block told after it supersedes
    nothing."""
    if at is None:
        return now_utc(), None
    return at, to_epoch(at)


def order(
    candidates: Candidates,
    settings: SearchSettings,
    versions: Versions,
    *,
    asked: datetime,
    until: float | None = None,
    ranked: Scored | None = None,
) -> Order:
    """``candidates`` in their final order under ``settings``: :func:`rank` (fusion, context), then
    supersession among the first ``supersede_depth`` (:func:`memlane.core.retrieval.supersession.supersede`),
    which reads the candidates through ``versions`` when it applies to the query. ``asked`` and ``until``:
    :func:`asked_at`. ``ranked``: the candidates' :func:`rank` under ``settings``, when the caller has it
    (settings that differ only in supersession rank alike, so a sweep over those ranks once)."""
    unmoved = rank(candidates, settings, asked=asked) if ranked is None else ranked
    if not applies(candidates.query, settings, asked):
        return Order(unmoved, unmoved)
    known = versions.read(unmoved, settings)
    blocks = known.blocks
    # Supersession reads the sessions of the blocks within its depth only.
    sessions = {ref: blocks[ref].session_id for ref, _, _ in unmoved[: settings.supersede_depth] if ref in blocks}
    moved, newer = supersede(
        unmoved,
        known.versions,
        candidates.query,
        settings,
        asked=asked,
        until=until,
        read=known.vectors,
        sessions=sessions,
        checked=True,
    )
    return Order(moved, unmoved, newer, blocks)


def search(
    store: Store,
    embedder: Embedder,
    cache: EmbeddingCache,
    model_id: str,
    user: str,
    query: str,
    settings: SearchSettings,
    k: int,
    *,
    at: datetime | None = None,
    after: float | None = None,
    before: float | None = None,
    filters: Filters | None = None,
    distinct: bool = True,
    explain: bool = False,
) -> list[Hit]:
    """``user``'s top-k hits for ``query`` under ``settings`` (``Memory.search`` once it has checked its
    input, which documents each argument): :func:`collect` with event times in [``after``, ``before``)
    (epoch seconds) among those ``filters`` keep, :func:`order` as of ``at`` (default: now), then
    :func:`hits`, each naming the blocks it supersedes and is superseded by. ``embedder`` embeds the query;
    ``cache`` holds the blocks' vectors, those of ``model_id``."""
    fetch = 2 * k if distinct else k
    # Folding perspectives needs up to two blocks per exchange among the candidates.
    settings = with_candidates(settings, fetch)
    asked, until = asked_at(at)
    found = collect(store, embedder, user, query, settings, after=after, before=before, filters=filters)
    ordered = order(found, settings, FromStore(store, cache, model_id, user, fetch), asked=asked, until=until)
    known = ordered.blocks
    newer = {old: tuple(known[n].id for n in news) for old, news in ordered.newer.items()}
    why = explainer(found, settings, asked=asked) if explain else None
    kind = score_kind(settings)
    top = hits(store, user, ordered.ranked, k, kind, distinct=distinct, superseded_by=newer, known=known, explain=why)
    top = with_supersedes(top, newer, known)
    if filters is not None and filters.annotations_after_cut and filters.annotations:
        return [h for h in top if filters.admits(h.block)]
    return top
