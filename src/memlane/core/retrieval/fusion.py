"""Fusion: each retriever's (reference, score) candidates become one scored list, best first.

Score fusion adds up each retriever's score margins (how far a candidate is above the retriever's lowest
candidate, relative to its best); weighted reciprocal rank fusion turns ranks into scores
(docs/design/003-retrieval.md has the measurements behind each).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memlane.core.retrieval.settings import RRF_K, Fusion, SearchSettings

Scored = list[tuple[int, float, dict[str, int]]]


def summed(gains: Mapping[str, Sequence[tuple[int, float]]]) -> Scored:
    """Each reference's gains summed over the retrievers (each retriever's list in its rank order), best
    first; ties keep the first retriever's order. Each entry carries its rank in every retriever."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, pairs in gains.items():
        for rank, (ref, gain) in enumerate(pairs, start=1):
            scores[ref] = scores.get(ref, 0.0) + gain
            ranks.setdefault(ref, {})[name] = rank
    order = sorted(scores, key=lambda r: -scores[r])
    return [(r, scores[r], ranks[r]) for r in order]


def rrf(
    rankings: Mapping[str, Sequence[int]],
    rrf_k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> Scored:
    """Weighted reciprocal rank fusion: score = sum over retrievers of weight / (rrf_k + rank), rank 1-based
    (weight 1 where ``weights`` does not name the retriever).

    Returns (reference, score, ranks by retriever), best first; ties keep the first retriever's order.
    """
    return summed(rrf_gains(rankings, rrf_k, weights))


def rrf_gains(
    rankings: Mapping[str, Sequence[int]], rrf_k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> dict[str, list[tuple[int, float]]]:
    """What each retriever adds to each reference's RRF score: weight / (rrf_k + rank), in its rank order."""
    gains: dict[str, list[tuple[int, float]]] = {}
    for name, refs in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        gains[name] = [(ref, weight / (rrf_k + rank)) for rank, ref in enumerate(refs, start=1)]
    return gains


def fuse(rankings: Mapping[str, Sequence[tuple[int, float]]], settings: SearchSettings) -> Scored:
    """One scored list, best first, from each retriever's (reference, score) candidates: a lone retriever
    without context keeps its own scores (cosine, BM25: the most informative ones to return); otherwise
    weighted RRF or score fusion (``settings.fusion``). Each entry carries the reference's rank in every
    retriever that found it."""
    if len(rankings) == 1 and not settings.uses_context:
        ((name, ranked),) = rankings.items()
        return [(ref, score, {name: i}) for i, (ref, score) in enumerate(ranked, start=1)]
    return summed(retriever_gains(rankings, settings))


def retriever_gains(
    rankings: Mapping[str, Sequence[tuple[int, float]]], settings: SearchSettings
) -> dict[str, list[tuple[int, float]]]:
    """What each retriever adds to each of its references' fused score under ``settings`` (in the
    retriever's rank order): the score itself for a lone retriever without context, else its margin under
    score fusion or its weighted RRF term. :func:`fuse` is their sum; a search's explanation shows them."""
    if len(rankings) == 1 and not settings.uses_context:
        return {name: list(ranked) for name, ranked in rankings.items()}
    weights = {"vector": settings.vector_weight, "keyword": settings.keyword_weight}
    if settings.fusion is Fusion.SCORE:
        return score_gains(rankings, weights, settings.candidates)
    return rrf_gains({name: [ref for ref, _ in ranked] for name, ranked in rankings.items()}, settings.rrf_k, weights)


def score_fusion(
    rankings: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float] | None = None,
    depth: int | None = None,
) -> Scored:
    """Weighted sum of each retriever's margins: a candidate's score above the retriever's floor, divided by
    its best candidate's score (negative scores count as 0). The floor is the lowest candidate's score when
    the retriever returned ``depth`` candidates (others it did not return may score just below), and 0 when
    it returned fewer (it returned every block it could score; None: always the lowest candidate's). So the
    scale of a retriever's scores drops out, a retriever whose candidates all score alike (a flat list:
    little evidence either way) weighs less, and a reference a retriever did not return gets 0 from it.
    Unlike RRF the margins survive: a block far ahead on BM25 (a rare name) stays far ahead. Weight 1 where
    ``weights`` does not name the retriever.

    Returns (reference, score, ranks by retriever), best first; ties keep the first retriever's order.
    """
    return summed(score_gains(rankings, weights, depth))


def score_gains(
    rankings: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float] | None = None,
    depth: int | None = None,
) -> dict[str, list[tuple[int, float]]]:
    """Each retriever's weighted margin for each of its references (:func:`score_fusion`), in its order."""
    gains: dict[str, list[tuple[int, float]]] = {}
    for name, ranked in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        clipped = [max(score, 0.0) for _, score in ranked]
        top = max(clipped, default=0.0)
        floor = min(clipped) if clipped and (depth is None or len(clipped) >= depth) else 0.0
        gains[name] = [
            (ref, weight * ((score - floor) / top if top > 0 else 0.0))
            for (ref, _), score in zip(ranked, clipped, strict=True)
        ]
    return gains
