"""The steps of a search, each a function anyone can call: :func:`collect` the candidates, :func:`rank`
them, make the :func:`hits`.

1. *Candidates* (:func:`collect`). Each retriever ranks the user's blocks and hands its top ``candidates``
   with their raw scores: the vector stage (:func:`vector_stage`: cosine over the user's key vectors) and
   the keyword stage (:func:`keyword_stage`: BM25 over the user's keys). When the settings use context,
   collect also reads each candidate's place (session, exchange, event time) and, for the session-words
   gain, the rank of each candidate's session by its people's words
   (:func:`memlane.core.ranking.session_words.session_word_ranks`).
2. *Ranking* (:func:`rank`). Fusion (:func:`memlane.core.retrieval.fusion.fuse`), then context rescoring
   (:func:`memlane.core.retrieval.context.rescore`: session and neighbour gains, session words, the
   query's time phrases), then the final order.
3. *Hits* (:func:`hits`): the first k blocks of the final order fetched, or k distinct exchanges.

Supersession comes between ranking and hits; :mod:`memlane.core.retrieval.searching` runs the steps in their
order, in one place (``Memory.search`` and ``memlane bench tune`` both call it). The steps are separate
because every setting but ``mode``, ``candidates``, ``fact_keys`` and the BM25 parameters applies after
:func:`collect`: the tuner collects each question's candidates once and orders them under many settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from memlane.core.embedding.protocol import Embedder
from memlane.core.errors import ValidationError
from memlane.core.model import Explanation, Filters, Hit, MemoryBlock, RetrieverPart, SearchMode
from memlane.core.ranking.session_words import session_word_ranks
from memlane.core.retrieval.context import Context, Position, rescore
from memlane.core.retrieval.fusion import Scored, fuse, retriever_gains, summed
from memlane.core.retrieval.settings import ScoreKind, SearchSettings
from memlane.core.store.candidates.gather import Gather
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.protocol import Store
from memlane.core.time_phrases import TimeWindow, time_windows

Ranked = list[tuple[int, float]]


@dataclass(frozen=True)
class Candidates:
    """What one query's retrievers found, before any ranking: each retriever's (block reference, raw
    score) list in its own order (``rankings``: ``vector`` first, then ``keyword``), the candidates'
    places (``positions``, read when ``context``) and their sessions' ranks by people's words
    (``word_ranks``, read when ``words``)."""

    query: str
    rankings: dict[str, Ranked]
    positions: dict[int, Position]
    word_ranks: dict[str, int]
    context: bool = False
    words: bool = False


def vector_stage(
    store: Store, embedder: Embedder, user: str, query: str, settings: SearchSettings, scope: Scope | None = None
) -> Ranked:
    """The vector retriever: the query's embedding against the user's key vectors, the top
    ``settings.candidates`` blocks by cosine similarity (a block scores as its best key) within ``scope``
    (None: :func:`search_scope` of the settings alone)."""
    qvec = embedder.embed([query])[0]
    return store.vector_candidates(user, qvec, settings.candidates, search_scope(settings) if scope is None else scope)


def keyword_stage(store: Store, user: str, query: str, settings: SearchSettings, scope: Scope | None = None) -> Ranked:
    """The keyword retriever: the top ``settings.candidates`` blocks by BM25 over the user's keys, with
    the settings' k1 and b, within ``scope`` (None: :func:`search_scope` of the settings alone)."""
    scope = search_scope(settings) if scope is None else scope
    return store.keyword_candidates(user, query, settings.candidates, scope, k1=settings.bm25_k1, b=settings.bm25_b)


def search_scope(
    settings: SearchSettings, after: float | None = None, before: float | None = None, filters: Filters | None = None
) -> Scope:
    """The blocks a search under ``settings`` ranks: the keys of the settings' kinds, with event times in
    [``after``, ``before``) (epoch seconds), of the blocks ``filters`` keep (None: all)."""
    return Scope(settings.key_kinds(), after, before, filters)


def collect(
    store: Store,
    embedder: Embedder,
    user: str,
    query: str,
    settings: SearchSettings,
    *,
    after: float | None = None,
    before: float | None = None,
    all_context: bool = False,
    filters: Filters | None = None,
) -> Candidates:
    """The candidates of ``query`` in ``user``'s memory under ``settings`` (its ``mode``, ``candidates``,
    ``fact_keys`` and BM25 parameters), with event times in [``after``, ``before``) (epoch seconds).

    Context (the candidates' places, their sessions' ranks by people's words) is read when the settings
    use it, or always with ``all_context``: for callers that rank the same candidates under other
    settings. ``embedder`` embeds the query (uncached: a query is rarely asked twice).

    ``filters`` restrict both retrievers' candidates (before their top-``candidates`` cut); context is
    then read for those candidates only, so the session and neighbour gains come from the restricted pool
    (docs/design/007-memory-model.md, "Filters")."""
    context = settings.uses_context or all_context
    words = settings.uses_words or all_context
    ask = Gather(
        query,
        embedder.embed([query])[0] if settings.mode in (SearchMode.VECTOR, SearchMode.HYBRID) else None,
        settings.mode in (SearchMode.KEYWORD, SearchMode.HYBRID),
        settings.candidates,
        search_scope(settings, after, before, filters),
        settings.bm25_k1,
        settings.bm25_b,
        context,
        words,
    )
    # One call: a store on a cluster reads it all on the user's node in one round trip.
    found = store.gather(user, ask)
    positions = {ref: Position(*where) for ref, where in found.positions.items()}
    word_ranks = session_word_ranks(found.word_counts) if words and positions else {}
    rankings = found.rankings
    return Candidates(query, rankings, positions, word_ranks, context, words)


def rank(candidates: Candidates, settings: SearchSettings, *, asked: datetime) -> Scored:
    """Every candidate in its final order under ``settings``, best first, as (reference, score, ranks by
    retriever): fusion, then context rescoring (only candidates with a place take part then: the others
    are gone from the store). The query's time phrases are read against ``asked``, when the question is
    asked. ``settings`` must be those the candidates were collected with, but for the settings that apply
    here (fusion, weights, context); fusion reads ``settings.candidates`` as the retrievers' depth.
    Settings whose context the candidates were collected without are refused (ValidationError)."""
    if (settings.uses_context and not candidates.context) or (settings.uses_words and not candidates.words):
        raise ValidationError(
            "these settings rescore by context the candidates were collected without; collect them with "
            "these settings or with all_context=True",
            where="settings",
        )
    scored = fuse(candidates.rankings, settings)
    if not settings.uses_context:
        return scored
    windows = _windows(candidates, settings, asked)
    positions = candidates.positions
    rescored = rescore({ref: score for ref, score, _ in scored}, positions, settings, candidates.word_ranks, windows)
    kept = ((ref, rescored[ref], ranks) for ref, _, ranks in scored if ref in positions)
    return sorted(kept, key=lambda h: -h[1])


def _windows(candidates: Candidates, settings: SearchSettings, asked: datetime) -> tuple[TimeWindow, ...]:
    """The windows of the query's time phrases, read against ``asked``, when the settings use them."""
    if not settings.uses_time:
        return ()
    return time_windows(candidates.query, asked, tolerance=settings.time_tolerance)


Explain = Callable[[int], Explanation]


def explainer(candidates: Candidates, settings: SearchSettings, *, asked: datetime) -> Explain:
    """Why each candidate scores what :func:`rank` gives it: a function from a reference to its
    :class:`Explanation` (each retriever's rank, score and margin, the fused score, each context gain and
    the time phrases its event time matched). Computed from the same candidates by the same functions as
    :func:`rank` (its score is ``fused`` plus the gains, to the last bit); only asked for when a search is
    to be explained."""
    gains = retriever_gains(candidates.rankings, settings)
    parts: dict[int, list[RetrieverPart]] = {}
    for name, ranked in candidates.rankings.items():
        for i, ((ref, score), (_, margin)) in enumerate(zip(ranked, gains[name], strict=True), start=1):
            parts.setdefault(ref, []).append(RetrieverPart(name, i, score, margin))
    fused = {ref: score for ref, score, _ in summed(gains)}  # what fuse gives: the gains summed
    context = None
    if settings.uses_context:
        windows = _windows(candidates, settings, asked)
        context = Context(fused, candidates.positions, settings, candidates.word_ranks, windows)

    def explain(ref: int) -> Explanation:
        base = Explanation(tuple(parts.get(ref, ())), fused.get(ref, 0.0))
        pos = candidates.positions.get(ref)
        if context is None or pos is None:
            return base
        session, near, words, time = context.gains(pos)
        return replace(
            base,
            session_gain=session,
            neighbour_gain=near,
            words_gain=words,
            time_gain=time,
            time_phrases=context.matched(pos),
        )

    return explain


def hits(
    store: Store,
    user: str,
    ranked: Scored,
    k: int,
    kind: ScoreKind,
    *,
    distinct: bool,
    superseded_by: Mapping[int, tuple[str, ...]] | None = None,
    known: Mapping[int, MemoryBlock] | None = None,
    explain: Explain | None = None,
) -> list[Hit]:
    """The first k of ``ranked`` as hits, their blocks fetched: k blocks, or with ``distinct`` k
    exchanges, each as its best block with its other perspectives' matching blocks folded into it
    (:meth:`memlane.core.memory.Memory.search`). Blocks deleted since they were ranked are passed over.
    ``superseded_by``: each superseded reference's newer block ids (from
    :func:`memlane.core.retrieval.searching.order`); ``known``: blocks already read, not fetched again;
    ``explain``: each hit's explanation (:func:`explainer`), when asked."""
    fetch = _Fetch(store, user, known or {})
    newer = superseded_by or {}
    if distinct:
        found = _distinct_hits(fetch, ranked, k, kind, newer)
    else:
        top = ranked[:k]
        blocks = fetch([ref for ref, _, _ in top])
        found = [
            (Hit(blocks[ref], score, ranks, kind, (), newer.get(ref, ())), ref)
            for ref, score, ranks in top
            if ref in blocks
        ]
    if explain is None:
        return [hit for hit, _ in found]
    return [replace(hit, explanation=explain(ref)) for hit, ref in found]


@dataclass(frozen=True)
class _Fetch:
    """Blocks by reference: those already read, the others from the store."""

    store: Store
    user: str
    known: Mapping[int, MemoryBlock]

    def __call__(self, refs: list[int]) -> dict[int, MemoryBlock]:
        missing = [ref for ref in refs if ref not in self.known]
        found = self.store.fetch_blocks(self.user, missing) if missing else {}
        return {ref: b for ref in refs if (b := self.known.get(ref) or found.get(ref)) is not None}


def _distinct_hits(
    fetch: _Fetch, ranked: Scored, k: int, kind: ScoreKind, newer: Mapping[int, tuple[str, ...]]
) -> list[tuple[Hit, int]]:
    """The first k exchanges of ``ranked`` (best first), each as its first block, the later blocks of the
    same exchange folded into it. Blocks are fetched 2k at a time: usually once."""
    firsts: dict[tuple[str, str, int, datetime, str], tuple[MemoryBlock, float, dict[str, int], list[str], int]] = {}
    for start in range(0, len(ranked), 2 * k):
        chunk = ranked[start : start + 2 * k]
        blocks = fetch([ref for ref, _, _ in chunk])
        for ref, score, ranks in chunk:
            block = blocks.get(ref)
            if block is None:  # deleted since it was ranked
                continue
            exchange = block.exchange_key  # never two exchanges, whatever their text
            if exchange in firsts:
                firsts[exchange][3].append(block.id)
            elif len(firsts) < k:
                firsts[exchange] = (block, score, ranks, [], ref)
        if len(firsts) >= k:
            break
    return [
        (Hit(b, score, ranks, kind, tuple(others), newer.get(ref, ())), ref)
        for b, score, ranks, others, ref in firsts.values()
    ]


def with_supersedes(
    found: list[Hit], superseded_by: Mapping[int, tuple[str, ...]], known: Mapping[int, MemoryBlock]
) -> list[Hit]:
    """``found``, each hit naming the older blocks its block was moved above (``Hit.supersedes``, and its
    explanation's when it has one): the inverse of ``superseded_by`` (:func:`hits`), whose references
    ``known`` holds. Read from the supersession's result, whatever rule decided it."""
    older: dict[str, list[str]] = {}
    for old, news in superseded_by.items():
        if old in known:
            for new in news:
                older.setdefault(new, []).append(known[old].id)
    return [_supersedes(h, tuple(older[h.block.id])) if h.block.id in older else h for h in found]


def _supersedes(h: Hit, ids: tuple[str, ...]) -> Hit:
    explanation = None if h.explanation is None else replace(h.explanation, supersedes=ids)
    return replace(h, supersedes=ids, explanation=explanation)
