"""Exact vector search over per-user matrices held in memory (cached by :mod:`memlane.core.store.candidates.usercache`).

Measured on this machine kind (research note on storage): numpy over a cached per-user matrix answers a
top-10 in 4 ms at 10k vectors and 12 ms at 100k, against 8 and 42-63 ms for sqlite-vec's vec0 scan, and it
needs no SQLite extension (this Python's sqlite3 cannot load one). The store keeps vectors in a few rows
per user (segments); a :class:`UserMatrix` mirrors one user's keys.

Vectors stay int8 in memory, with a float32 scale per key, and are dequantized a few hundred rows at a time
into a small scratch buffer while scoring. Dequantizing a whole user once at load was measured slower on
this machine kind: a fresh 4 MB float32 matrix (and its temporary) costs about 2,000 page faults, which took
a cold x500 user's load from 0.9 to 8.5 ms; scoring from int8 costs 0.3 ms against 0.2 ms for a float32
matrix (2,600 keys), and the cache holds four times as many users.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.core.store.candidates.columns import Column, capacity_bytes, extended_all

KIND_CODES = {"message": 0, "summary": 1, "fact": 2}


@dataclass
class UserMatrix:
    """One user's search-key vectors and what each row points at; key ``j``'s vector is ``vectors[j] *
    scales[j]``."""

    version: int
    vectors: npt.NDArray[np.int8]  # (n, dim)
    scales: npt.NDArray[np.float32]  # (n,)
    block_pks: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]
    event_ts: npt.NDArray[np.float64]
    # The keys' own pks, ascending (an approximate index names keys by them: memlane.core.store.sqlite.ann)
    key_pks: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    # The buffers the arrays live in once a write extended them (memlane.core.store.candidates.columns), by field.
    _columns: dict[str, Column] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n(self) -> int:
        return int(self.vectors.shape[0])

    def _arrays(self) -> dict[str, npt.NDArray[Any]]:
        return {name: getattr(self, name) for name in _MATRIX_COLUMNS}

    @property
    def nbytes(self) -> int:
        """The memory the matrix holds, its buffers' room to grow included."""
        return capacity_bytes(self._arrays(), self._columns)

    def appended(self, other: UserMatrix) -> UserMatrix:
        """This matrix with ``other``'s rows after its own, extended in place where it can be
        (:func:`memlane.core.store.candidates.columns.extended`): an add does not copy the user."""
        if self.vectors.shape[0] == 0:  # an empty user's matrix has no known width yet
            return other
        arrays, columns = extended_all(self._arrays(), self._columns, other._arrays())
        out = UserMatrix(version=other.version, **arrays)
        out._columns = columns
        return out


_MATRIX_COLUMNS = ("vectors", "scales", "block_pks", "kinds", "event_ts", "key_pks")


_CHUNK = 256  # rows dequantized at a time (a 384 KB scratch at dim 384)


def key_scores(matrix: UserMatrix, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Every key's dot product with ``query``."""
    vectors = matrix.vectors
    n = vectors.shape[0]
    out = np.empty(n, dtype=np.float32)
    scratch = np.empty((min(n, _CHUNK), vectors.shape[1]), dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        part = scratch[: stop - start]
        np.copyto(part, vectors[start:stop], casting="unsafe")
        np.matmul(part, q, out=out[start:stop])
    out *= matrix.scales
    return out


@dataclass(frozen=True)
class BlockSet:
    """The blocks a search may return (``allow``) or must not return (not ``allow``), by reference:
    what the memory model's filters and expired TTLs come down to in the in-memory indexes
    (docs/design/007-memory-model.md)."""

    pks: npt.NDArray[np.int64]  # ascending, unique
    allow: bool

    @classmethod
    def of(cls, pks: list[int], *, allow: bool) -> BlockSet:
        return cls(np.unique(np.asarray(pks, dtype=np.int64)), allow)

    def without(self, pks: list[int]) -> BlockSet:
        """An allowed set less ``pks``."""
        return BlockSet(np.setdiff1d(self.pks, np.asarray(pks, dtype=np.int64), assume_unique=False), self.allow)

    def mask(self, block_pks: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which of the keys (by their blocks) the set keeps."""
        if self.pks.size == 0:
            return np.full(block_pks.shape[0], not self.allow, dtype=np.bool_)
        at = np.searchsorted(self.pks, block_pks)
        at[at >= self.pks.size] = 0
        found: npt.NDArray[np.bool_] = self.pks[at] == block_pks
        return found if self.allow else np.logical_not(found)


@dataclass(frozen=True, slots=True)
class KeyRules:
    """Which keys of a user's in-memory index are scored: a search's
    :class:`memlane.core.store.candidates.scope.Scope` as the in-memory indexes read it. ``codes``: the key
    kinds' codes (:data:`KIND_CODES`; None: every kind); event times in [``after``, ``before``) (None:
    unbounded); ``blocks``: the blocks whose keys may be scored or must not be (None: every block)."""

    codes: frozenset[int] | None = None
    after: float | None = None
    before: float | None = None
    blocks: BlockSet | None = None


EVERY_KEY = KeyRules()


def key_mask(
    kinds: npt.NDArray[np.int8],
    event_ts: npt.NDArray[np.float64],
    rules: KeyRules,
    block_pks: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.bool_] | None:
    """Which keys ``rules`` keep (None: all of them): kind codes, event time, and the keys' blocks
    (``block_pks``; not given: the blocks are not asked) in the rules' blocks."""
    mask: npt.NDArray[np.bool_] | None = None
    if rules.blocks is not None and block_pks is not None:
        mask = rules.blocks.mask(block_pks)
    if rules.codes is not None and len(rules.codes) < len(KIND_CODES):
        m = np.isin(kinds, np.fromiter(rules.codes, dtype=np.int8))
        mask = m if mask is None else mask & m
    if rules.after is not None:
        m = event_ts >= rules.after
        mask = m if mask is None else mask & m
    if rules.before is not None:
        m = event_ts < rules.before
        mask = m if mask is None else mask & m
    return mask


def best_per_block(
    scores: npt.NDArray[np.floating[Any]], block_pks: npt.NDArray[np.int64], k: int
) -> list[tuple[int, float]]:
    """The k best blocks by their best key's score, best first; keys scored -inf are left out. Equal
    scores rank by key position (the earlier key first), so the answer depends only on the scores and not
    on how many keys without a score were passed along (the keyword stage passes only the keys it hit)."""
    n = scores.shape[0]
    if n == 0 or k <= 0:
        return []
    # A block may own several keys: take enough keys to find k distinct blocks, widening if needed.
    want = min(n, max(4 * k, k + 32))
    while True:
        complete = want >= n
        if complete:
            idx = np.arange(n)
        else:
            # Every key scoring at least the want-th best score, in key order: argpartition picks among
            # keys tied at that score in no defined order.
            kth = float(scores[np.argpartition(-scores, want - 1)[want - 1]])
            complete = kth == -np.inf
            idx = np.flatnonzero(scores > kth if complete else scores >= kth)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        seen: dict[int, float] = {}
        for i in idx:
            s = float(scores[i])
            if s == -np.inf:
                break
            pk = int(block_pks[i])
            if pk not in seen:
                seen[pk] = s
                if len(seen) == k:
                    break
        if len(seen) == k or complete:
            return list(seen.items())
        want = min(n, want * 4)


def top_blocks(
    matrix: UserMatrix,
    query: npt.NDArray[np.float32],
    k: int,
    rules: KeyRules = EVERY_KEY,
) -> list[tuple[int, float]]:
    """Exact cosine top-k *blocks* (a block scores as its best key) among the keys ``rules`` keep. Vectors
    are L2-normalised. With an allowed blocks set, only the keys of those blocks are scored (a narrow
    filter costs what it keeps)."""
    if matrix.vectors.shape[0] == 0 or k <= 0:
        return []
    blocks = rules.blocks
    if blocks is not None and blocks.allow:
        rows = np.flatnonzero(blocks.mask(matrix.block_pks)).astype(np.int64)
        return top_blocks_of_rows(matrix, rows, query, k, replace(rules, blocks=None))
    scores = key_scores(matrix, query)
    mask = key_mask(matrix.kinds, matrix.event_ts, rules, matrix.block_pks)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return best_per_block(scores, matrix.block_pks, k)


def top_blocks_of_rows(
    matrix: UserMatrix, rows: npt.NDArray[np.int64], query: npt.NDArray[np.float32], k: int, rules: KeyRules
) -> list[tuple[int, float]]:
    """:func:`top_blocks` over the keys at ``rows`` (ascending) only."""
    if rows.size == 0 or k <= 0:
        return []
    sub = UserMatrix(
        version=matrix.version,
        vectors=matrix.vectors[rows],
        scales=matrix.scales[rows],
        block_pks=matrix.block_pks[rows],
        kinds=matrix.kinds[rows],
        event_ts=matrix.event_ts[rows],
    )
    scores = key_scores(sub, query)
    mask = key_mask(sub.kinds, sub.event_ts, rules, sub.block_pks)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return best_per_block(scores, sub.block_pks, k)
