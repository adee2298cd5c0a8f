"""Vector scores from int8 keys: dequantized in chunks, equal to scoring the dequantized matrix whole."""

from __future__ import annotations

import numpy as np
import pytest

from memlane.core.store.candidates import vectors
from memlane.core.store.candidates.vectors import UserMatrix, key_scores, top_blocks
from memlane.core.store.sqlite.segments import quantize


def matrix_of(floats: np.ndarray, block_pks: np.ndarray | None = None) -> UserMatrix:
    q, scales = quantize(floats)
    n = floats.shape[0]
    return UserMatrix(
        version=0,
        vectors=q,
        scales=scales,
        block_pks=np.arange(n, dtype=np.int64) if block_pks is None else block_pks,
        kinds=np.zeros(n, dtype=np.int8),
        event_ts=np.arange(n, dtype=np.float64),
    )


@pytest.mark.parametrize("n", [1, 255, 256, 257, 700])
def test_chunked_scores_equal_the_dequantized_product(n: int) -> None:
    rng = np.random.default_rng(n)
    floats = rng.normal(size=(n, 48)).astype(np.float32)
    floats /= np.linalg.norm(floats, axis=1, keepdims=True)
    query = floats[n // 2] + 0.1 * rng.normal(size=48).astype(np.float32)
    m = matrix_of(floats)
    expected = (m.vectors.astype(np.float32) * m.scales[:, None]) @ query
    np.testing.assert_allclose(key_scores(m, query), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(key_scores(m, query), floats @ query, atol=0.02)  # int8 stays near the floats


def test_top_blocks_ranks_like_float_vectors_and_scores_each_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors, "_CHUNK", 7)  # many chunks, one partial
    rng = np.random.default_rng(1)
    floats = rng.normal(size=(40, 16)).astype(np.float32)
    floats /= np.linalg.norm(floats, axis=1, keepdims=True)
    m = matrix_of(floats, block_pks=np.arange(40, dtype=np.int64) // 2)  # two keys per block
    for j in (0, 13, 39):
        top = top_blocks(m, floats[j], 3)
        assert top[0][0] == j // 2 and abs(top[0][1] - 1.0) < 0.01
        best = (floats @ floats[j]).reshape(20, 2).max(axis=1)  # a block scores as its best key
        # the exact top 3, but for near ties (int8 moves a score by under 0.01 here)
        np.testing.assert_allclose(best[[b for b, _ in top]], np.sort(best)[::-1][:3], atol=0.01)
        np.testing.assert_allclose([s for _, s in top], best[[b for b, _ in top]], atol=0.01)
    assert top_blocks(matrix_of(np.zeros((0, 16), dtype=np.float32)), floats[0], 3) == []
