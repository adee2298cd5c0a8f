"""Search: settings and presets, then the pipeline that runs them, in steps anyone can call.

1. *Candidates* (:func:`collect`, :mod:`memlane.core.retrieval.pipeline`): each retriever (exact cosine over
   the user's key vectors, BM25 over the user's keys) ranks the user's blocks and hands its top
   ``candidates`` to fusion, with the context the settings need.
2. *Ranking* (:func:`rank`): score fusion adds up each retriever's score margins, or weighted reciprocal
   rank fusion turns ranks into scores (:mod:`memlane.core.retrieval.fusion`); then each block may borrow
   evidence from its context (:mod:`memlane.core.retrieval.context`): from the best blocks of its own
   session, from its neighbouring exchanges, from its session's rank by what the people in it said, and
   from the query's time phrases.
3. *Supersession* (:mod:`memlane.core.retrieval.supersession`): among the best candidates, a newer block
   that restates an older one ranks just above it, and the older hit names it.

:func:`search` (:mod:`memlane.core.retrieval.searching`) runs them in that order, then makes the hits: it is
``Memory.search`` once the input is checked. Its ordering stage, :func:`order` (rank, then supersession), is
also what ``memlane bench tune`` calls on candidates collected once, so the order of the steps is written in
one place.

Every mechanism is a typed field of :class:`SearchSettings` (:mod:`memlane.core.retrieval.settings`), so
benchmarks can sweep it; presets are named settings, and ``hybrid`` (the default mode) is the best preset on
the benchmarks' dev splits. docs/design/003-retrieval.md has the measurements behind each choice.
"""

from memlane.core.retrieval.context import Position, rescore
from memlane.core.retrieval.fusion import Scored, fuse, rrf, score_fusion
from memlane.core.retrieval.pipeline import (
    Candidates,
    Explain,
    collect,
    explainer,
    hits,
    keyword_stage,
    rank,
    vector_stage,
    with_supersedes,
)
from memlane.core.retrieval.searching import FromStore, Known, Order, Versions, asked_at, order, search
from memlane.core.retrieval.settings import (
    MAX_K,
    PRESETS,
    RRF_K,
    SCORE_KINDS,
    Fusion,
    ScoreKind,
    SearchSettings,
    check_k,
    resolve_settings,
    score_kind,
    with_candidates,
)
from memlane.core.retrieval.statements import Version
from memlane.core.retrieval.supersession import asks_about_past, supersede, versions_of

__all__ = [
    "MAX_K",
    "PRESETS",
    "RRF_K",
    "SCORE_KINDS",
    "Candidates",
    "Explain",
    "FromStore",
    "Fusion",
    "Known",
    "Order",
    "Position",
    "ScoreKind",
    "Scored",
    "SearchSettings",
    "Version",
    "Versions",
    "asked_at",
    "asks_about_past",
    "check_k",
    "collect",
    "explainer",
    "fuse",
    "hits",
    "keyword_stage",
    "order",
    "rank",
    "rescore",
    "resolve_settings",
    "rrf",
    "score_fusion",
    "score_kind",
    "search",
    "supersede",
    "vector_stage",
    "versions_of",
    "with_candidates",
    "with_supersedes",
]
