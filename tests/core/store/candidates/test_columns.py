"""The cached per-user indexes grow in place: an add extends the buffers instead of copying the user, and
every version a reader holds keeps its rows."""

from __future__ import annotations

import numpy as np

from memlane.core.store.candidates.columns import extended
from memlane.core.store.candidates.vectors import UserMatrix


def matrix(start: int, n: int, version: int) -> UserMatrix:
    rng = np.random.default_rng(start)
    return UserMatrix(
        version=version,
        vectors=rng.integers(-127, 127, (n, 8)).astype(np.int8),
        scales=rng.random(n).astype(np.float32),
        block_pks=np.arange(start, start + n, dtype=np.int64),
        kinds=np.zeros(n, dtype=np.int8),
        event_ts=np.arange(start, start + n, dtype=np.float64),
        key_pks=np.arange(start, start + n, dtype=np.int64),
    )


def test_appends_extend_one_buffer_and_older_versions_keep_their_rows() -> None:
    v1 = matrix(0, 1000, 1)
    v2 = v1.appended(matrix(1000, 3, 2))  # the first append copies into a buffer with room
    v3 = v2.appended(matrix(1003, 3, 3))  # the next ones write into that room
    assert np.shares_memory(v2.vectors, v3.vectors) and not np.shares_memory(v1.vectors, v2.vectors)
    assert v3.block_pks.tolist() == list(range(1006)) and v2.block_pks.tolist() == list(range(1003))
    # An older version appended to again (another branch) must not write over v3's rows: it gets a copy.
    other = v2.appended(matrix(5000, 3, 3))
    assert not np.shares_memory(other.vectors, v3.vectors)
    assert v3.block_pks[-3:].tolist() == [1003, 1004, 1005] and other.block_pks[-3:].tolist() == [5000, 5001, 5002]
    expected = np.concatenate([v1.vectors, matrix(1000, 3, 2).vectors, matrix(1003, 3, 3).vectors])
    assert np.array_equal(v3.vectors, expected)
    assert v3.nbytes == v2.nbytes >= v3.vectors.nbytes + v3.scales.nbytes  # the room is counted, and stable


def test_many_appends_copy_the_user_a_few_times_not_once_each() -> None:
    current, column = np.arange(10_000, dtype=np.int64), None
    copies = 0
    for i in range(2000):
        before = current
        current, column = extended(current, column, np.array([10_000 + i], dtype=np.int64))
        copies += not np.shares_memory(before, current)
    assert current.tolist() == list(range(12_000))
    assert copies == 1  # 10,000 rows, then a buffer with a quarter more room: the first append copies
