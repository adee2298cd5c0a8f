"""Search: settings and presets, then the pipeline that runs them, in two steps anyone can call.

1. *Candidates* (:func:`collect`, :mod:`memlane.core.retrieval.pipeline`): each retriever (exact cosine over
   the user's key vectors, BM25 over the user's keys) ranks the user's blocks and hands its top
   ``candidates`` to fusion, with the context the settings need.
2. *Ranking* (:func:`rank`): score fusion adds up each retriever's score margins, or weighted reciprocal
   rank fusion turns ranks into scores (:mod:`memlane.core.retrieval.fusion`); then each block may borrow
   evidence from its context (:mod:`memlane.core.retrieval.context`): from the best blocks of its own
   session, from its neighbouring exchanges, from its session's rank by what the people in it said, and
   from the query's time phrases.
3. *Supersession* (:func:`supersede_ranked`, :mod:`memlane.core.retrieval.supersession`): among the best
   candidates, a newer block that restates an older one ranks just above it, and the older hit names it.

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
    supersede_ranked,
    vector_stage,
    with_supersedes,
)
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
from memlane.core.retrieval.supersession import Version, asks_about_past, supersede, versions_of

__all__ = [
    "MAX_K",
    "PRESETS",
    "RRF_K",
    "SCORE_KINDS",
    "Candidates",
    "Explain",
    "Fusion",
    "Position",
    "ScoreKind",
    "Scored",
    "SearchSettings",
    "Version",
    "asks_about_past",
    "check_k",
    "collect",
    "explainer",
    "fuse",
    "hits",
    "keyword_stage",
    "rank",
    "rescore",
    "resolve_settings",
    "rrf",
    "score_fusion",
    "score_kind",
    "supersede",
    "supersede_ranked",
    "vector_stage",
    "versions_of",
    "with_candidates",
    "with_supersedes",
]
