"""Weighted RRF, score fusion and session/neighbour rescoring: the arithmetic, order independence, settings
checks."""

from __future__ import annotations

import random

import pytest

from memlane.core.errors import ValidationError
from memlane.core.retrieval import (
    PRESETS,
    Fusion,
    Position,
    SearchSettings,
    fuse,
    rescore,
    resolve_settings,
    rrf,
    score_fusion,
)


def test_weighted_rrf_scores_and_ranks() -> None:
    fused = rrf({"vector": [1, 2], "keyword": [2, 3]}, rrf_k=5, weights={"vector": 0.5})
    scores = {ref: score for ref, score, _ in fused}
    assert scores[2] == pytest.approx(0.5 / 7 + 1 / 6)
    assert scores[1] == pytest.approx(0.5 / 6)
    assert scores[3] == pytest.approx(1 / 7)
    assert [ref for ref, _, _ in fused] == [2, 3, 1]
    assert dict((ref, ranks) for ref, _, ranks in fused)[2] == {"vector": 2, "keyword": 1}


def test_score_fusion_adds_weighted_margins_over_each_retrievers_lowest() -> None:
    vector = [(1, 0.8), (2, 0.6), (3, 0.4)]  # margins (s - 0.4) / 0.8: 0.5, 0.25, 0
    keyword = [(2, 20.0), (4, 10.0), (1, 2.0)]  # margins (s - 2) / 20: 0.9, 0.4, 0
    fused = score_fusion({"vector": vector, "keyword": keyword}, {"vector": 0.5, "keyword": 1.0})
    scores = {ref: score for ref, score, _ in fused}
    assert scores == pytest.approx({1: 0.25, 2: 0.125 + 0.9, 3: 0.0, 4: 0.4})
    assert [ref for ref, _, _ in fused] == [2, 4, 1, 3]
    assert dict((ref, ranks) for ref, _, ranks in fused)[1] == {"vector": 1, "keyword": 3}
    # Only the ratios of a retriever's scores matter, not their scale.
    tenfold = score_fusion({"vector": vector, "keyword": [(r, 10 * s) for r, s in keyword]}, {"vector": 0.5})
    assert {ref: score for ref, score, _ in tenfold} == pytest.approx(scores)


def test_score_fusion_ignores_a_retriever_without_positive_scores() -> None:
    fused = score_fusion({"vector": [(1, -0.1), (2, -0.3)], "keyword": [(2, 3.0), (3, 1.0)]})
    assert {ref: score for ref, score, _ in fused} == pytest.approx({1: 0.0, 2: 2 / 3, 3: 0.0})
    assert score_fusion({"vector": [], "keyword": [(5, 1.0)]}) == [(5, 0.0, {"keyword": 1})]


def test_score_fusion_floor_is_zero_when_a_retriever_returned_fewer_than_asked() -> None:
    vector, keyword = [(1, 0.8), (2, 0.6)], [(1, 4.0)]
    # Asked for 2: the vector list is full (blocks it did not return may score just below 0.6), the
    # keyword list is not (it returned every block with a matching term).
    fused = score_fusion({"vector": vector, "keyword": keyword}, depth=2)
    assert {ref: score for ref, score, _ in fused} == pytest.approx({1: 0.25 + 1.0, 2: 0.0})
    # A user with one block: first in both retrievers, and its score says so.
    assert score_fusion({"vector": [(7, 0.3)], "keyword": [(7, 2.0)]}, {"vector": 0.55, "keyword": 0.45}, 50) == [
        (7, pytest.approx(1.0), {"vector": 1, "keyword": 1})
    ]


def test_fuse_follows_the_fusion_setting() -> None:
    rankings = {"vector": [(1, 0.9), (2, 0.85), (3, 0.1)], "keyword": [(3, 9.0), (2, 1.0), (1, 0.5)]}
    by_rank = fuse(rankings, SearchSettings(fusion=Fusion.RRF))
    by_score = fuse(rankings, SearchSettings(fusion=Fusion.SCORE))
    # Ranks tie 1 and 3 (first in one list, last in the other); margins put 3's BM25 lead first.
    assert [ref for ref, _, _ in by_rank] == [1, 3, 2]
    assert next(ref for ref, _, _ in by_score) == 3
    assert SearchSettings(fusion="score").fusion is Fusion.SCORE  # type: ignore[arg-type]
    assert SearchSettings(fusion=Fusion.SCORE).to_json()["fusion"] == "score"


def test_rescore_adds_session_and_neighbour_context() -> None:
    settings = SearchSettings(session_weight=0.5, session_top=2, neighbour_weight=0.25, neighbour_span=1)
    scores = {1: 1.0, 2: 0.5, 3: 0.2, 4: 0.9}
    positions = {1: Position("a", 0), 2: Position("a", 1), 3: Position("a", 5), 4: Position("b", 0)}
    out = rescore(scores, positions, settings)
    assert out[1] == pytest.approx(1.0 + 0.5 * 1.5 + 0.25 * 0.5)
    assert out[2] == pytest.approx(0.5 + 0.5 * 1.5 + 0.25 * 1.0)
    assert out[3] == pytest.approx(0.2 + 0.5 * 1.5)  # no neighbour within span 1
    assert out[4] == pytest.approx(0.9 + 0.5 * 0.9)


@pytest.mark.parametrize("preset", ["hybrid", "hybrid-context"])
def test_rescore_is_independent_of_candidate_order_and_leaves_unplaced_blocks(preset: str) -> None:
    settings = PRESETS[preset]
    assert settings.uses_context
    rng = random.Random(7)
    scores = {ref: rng.random() for ref in range(40)}
    positions = {ref: Position(f"s{ref % 4}", ref // 4) for ref in range(39)}
    items = list(scores.items())
    rng.shuffle(items)
    assert rescore(dict(items), positions, settings) == pytest.approx(rescore(scores, positions, settings))
    assert rescore(scores, positions, settings)[39] == scores[39]


def test_rescore_without_context_is_identity() -> None:
    scores = {1: 0.3, 2: 0.1}
    assert rescore(scores, {1: Position("a", 0), 2: Position("a", 1)}, PRESETS["hybrid-rrf"]) == scores


@pytest.mark.parametrize(
    "field, value",
    [
        ("session_weight", -0.1),
        ("neighbour_weight", float("nan")),
        ("session_top", 0),
        ("rrf_k", -1),
        ("fusion", "borda"),
    ],
)
def test_bad_settings_are_rejected(field: str, value: float | str) -> None:
    with pytest.raises((ValidationError, ValueError)):
        SearchSettings(**{field: value})  # type: ignore[arg-type]


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ValidationError, match="hybrid-context"):
        resolve_settings("nope")
