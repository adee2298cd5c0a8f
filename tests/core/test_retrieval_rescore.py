"""Weighted RRF and session/neighbour rescoring: the arithmetic, order independence, settings checks."""

from __future__ import annotations

import random

import pytest

from memlane.core.errors import ValidationError
from memlane.core.retrieval import PRESETS, Position, SearchSettings, rescore, resolve_settings, rrf


def test_weighted_rrf_scores_and_ranks() -> None:
    fused = rrf({"vector": [1, 2], "keyword": [2, 3]}, rrf_k=5, weights={"vector": 0.5})
    scores = {ref: score for ref, score, _ in fused}
    assert scores[2] == pytest.approx(0.5 / 7 + 1 / 6)
    assert scores[1] == pytest.approx(0.5 / 6)
    assert scores[3] == pytest.approx(1 / 7)
    assert [ref for ref, _, _ in fused] == [2, 3, 1]
    assert dict((ref, ranks) for ref, _, ranks in fused)[2] == {"vector": 2, "keyword": 1}


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
    [("session_weight", -0.1), ("neighbour_weight", float("nan")), ("session_top", 0), ("rrf_k", -1)],
)
def test_bad_settings_are_rejected(field: str, value: float) -> None:
    with pytest.raises((ValidationError, ValueError)):
        SearchSettings(**{field: value})  # type: ignore[arg-type]


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ValidationError, match="hybrid-context"):
        resolve_settings("nope")
