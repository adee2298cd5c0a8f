"""Exact vector search over per-user matrices held in memory.

Measured on this machine kind (research note on storage): numpy over a cached per-user matrix answers a
top-10 in 4 ms at 10k vectors and 12 ms at 100k, against 8 and 42-63 ms for sqlite-vec's vec0 scan, and it
needs no SQLite extension (this Python's sqlite3 cannot load one). The store keeps vectors in a table
clustered by user; this cache mirrors one user's rows and is invalidated by the user's version counter,
which every write bumps in the same transaction, so several processes sharing a file stay correct.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

KIND_CODES = {"message": 0, "summary": 1, "fact": 2}


@dataclass
class UserMatrix:
    """One user's search-key vectors and what each row points at."""

    version: int
    vectors: npt.NDArray[np.float32]  # (n, dim)
    block_pks: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]
    event_ts: npt.NDArray[np.float64]

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.block_pks.nbytes + self.kinds.nbytes + self.event_ts.nbytes)

    def appended(self, other: UserMatrix) -> UserMatrix:
        if self.vectors.shape[0] == 0:  # an empty user's matrix has no known width yet
            return other
        return UserMatrix(
            version=other.version,
            vectors=np.concatenate([self.vectors, other.vectors]),
            block_pks=np.concatenate([self.block_pks, other.block_pks]),
            kinds=np.concatenate([self.kinds, other.kinds]),
            event_ts=np.concatenate([self.event_ts, other.event_ts]),
        )


class VectorCache:
    """An LRU of user matrices bounded by bytes, safe to share between threads."""

    def __init__(self, max_bytes: int = 2 * 1024**3) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[int, UserMatrix] = OrderedDict()
        self._bytes = 0

    def get(self, user_id: int, version: int) -> UserMatrix | None:
        with self._lock:
            item = self._items.get(user_id)
            if item is None or item.version != version:
                return None
            self._items.move_to_end(user_id)
            return item

    def put(self, user_id: int, matrix: UserMatrix) -> None:
        with self._lock:
            self._store(user_id, matrix)

    def append(self, user_id: int, prev_version: int, rows: UserMatrix) -> None:
        """After our own commit moved the user from ``prev_version`` to ``rows.version``, add its rows.

        If the cached copy is not exactly at ``prev_version`` someone else wrote in between; then the cache
        entry is left stale and the next search reloads it.
        """
        with self._lock:
            item = self._items.get(user_id)
            if item is not None and item.version == prev_version:
                self._store(user_id, item.appended(rows))

    def drop(self, user_id: int) -> None:
        with self._lock:
            item = self._items.pop(user_id, None)
            if item is not None:
                self._bytes -= item.nbytes

    def _store(self, user_id: int, matrix: UserMatrix) -> None:
        old = self._items.pop(user_id, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._items[user_id] = matrix
        self._bytes += matrix.nbytes
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.nbytes


def top_blocks(
    matrix: UserMatrix,
    query: npt.NDArray[np.float32],
    k: int,
    *,
    kinds: frozenset[int] | None = None,
    after: float | None = None,
    before: float | None = None,
) -> list[tuple[int, float]]:
    """Exact cosine top-k *blocks* (a block scores as its best key). Vectors are L2-normalised."""
    if matrix.vectors.shape[0] == 0 or k <= 0:
        return []
    scores = matrix.vectors @ query
    mask: npt.NDArray[np.bool_] | None = None
    if kinds is not None and len(kinds) < len(KIND_CODES):
        mask = np.isin(matrix.kinds, np.fromiter(kinds, dtype=np.int8))
    if after is not None:
        m = matrix.event_ts >= after
        mask = m if mask is None else mask & m
    if before is not None:
        m = matrix.event_ts < before
        mask = m if mask is None else mask & m
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    n = scores.shape[0]
    # A block may own several keys: take enough keys to find k distinct blocks, widening if needed.
    want = min(n, max(4 * k, k + 32))
    while True:
        idx = np.argpartition(-scores, want - 1)[:want] if want < n else np.arange(n)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        seen: dict[int, float] = {}
        for i in idx:
            s = float(scores[i])
            if s == -np.inf:
                break
            pk = int(matrix.block_pks[i])
            if pk not in seen:
                seen[pk] = s
                if len(seen) == k:
                    break
        if len(seen) == k or want >= n:
            return list(seen.items())
        want = min(n, want * 4)
