"""BM25 over per-user term indexes held in memory, with the store's global statistics.

Why not FTS5's own ``bm25()``: it counts each query term's document frequency by walking the term's
whole posting list across *all* users, which is 24 of a 25 ms query on a 1.3M-key store (matching the
user's rows alone takes 1.2 ms). Here the store keeps document frequencies in a table updated by every
write, and each user's (key, term, count) rows are cached like the key vectors, so a query costs what the
user's memory costs, not what the whole store costs.

The statistics stay global (per file), as FTS5's were: measured, per-user document frequencies from a few
hundred exchanges rank worse (docs/design/003-retrieval.md). The formula is FTS5's, idf = ln((N - n + 0.5) /
(n + 0.5)) floored at 1e-6, with k1 and b as arguments (FTS5 fixed them at 1.2 and 0.75; the search presets
choose them, :class:`memlane.core.retrieval.SearchSettings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memlane.core.store.vectors import best_per_block, key_mask

BM25_K1 = 1.2  # FTS5's, and the usual defaults
BM25_B = 0.75
IDF_FLOOR = 1e-6


@dataclass
class UserTerms:
    """One user's keys as bags of term ids: key ``j`` holds ``term_ids[i]`` ``counts[i]`` times for each
    ``i`` in ``offsets[j]:offsets[j + 1]``."""

    version: int
    block_pks: npt.NDArray[np.int64]  # (n,) per key
    kinds: npt.NDArray[np.int8]
    event_ts: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.float32]  # tokens per key
    offsets: npt.NDArray[np.int64]  # (n + 1,) where each key's entries start
    term_ids: npt.NDArray[np.int32]  # (m,) per (key, term) entry
    counts: npt.NDArray[np.uint16]

    @property
    def nbytes(self) -> int:
        arrays = (self.block_pks, self.kinds, self.event_ts, self.lengths, self.offsets, self.term_ids, self.counts)
        return int(sum(a.nbytes for a in arrays))

    @property
    def max_term(self) -> int:
        return int(self.term_ids.max()) if self.term_ids.size else -1

    def appended(self, other: UserTerms) -> UserTerms:
        return UserTerms(
            version=other.version,
            block_pks=np.concatenate([self.block_pks, other.block_pks]),
            kinds=np.concatenate([self.kinds, other.kinds]),
            event_ts=np.concatenate([self.event_ts, other.event_ts]),
            lengths=np.concatenate([self.lengths, other.lengths]),
            offsets=np.concatenate([self.offsets, other.offsets[1:] + self.offsets[-1]]),
            term_ids=np.concatenate([self.term_ids, other.term_ids]),
            counts=np.concatenate([self.counts, other.counts]),
        )


def encode_bag(bag: dict[int, int]) -> tuple[bytes, bytes]:
    """A key's term bag as stored: term ids (int32) and counts (uint16, saturating), in id order."""
    ids = np.fromiter(sorted(bag), dtype=np.int32, count=len(bag))
    counts = np.fromiter((min(bag[i], 65535) for i in ids.tolist()), dtype=np.uint16, count=len(bag))
    return ids.tobytes(), counts.tobytes()


def idf(df: npt.NDArray[np.float64], n_keys: int) -> npt.NDArray[np.float64]:
    """FTS5's BM25 idf, floored so a term in most keys still counts a little (never negatively)."""
    raw = np.log((n_keys - df + 0.5) / (df + 0.5))
    return np.maximum(raw, IDF_FLOOR)


def bm25_top_blocks(
    index: UserTerms,
    query: Sequence[tuple[int, float]],
    avgdl: float,
    k: int,
    *,
    kinds: frozenset[int] | None = None,
    after: float | None = None,
    before: float | None = None,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[tuple[int, float]]:
    """BM25 top-k blocks (a block scores as its best key) for ``query`` = (term id, idf) pairs.

    Only keys holding at least one query term are ranked; the filters narrow the ranked keys, not the
    statistics. One gather over the user's (key, term) entries finds the hits: no per-term posting lists.
    """
    n = index.block_pks.shape[0]
    top = index.max_term
    present = [(term_id, w) for term_id, w in query if 0 <= term_id <= top]
    if n == 0 or k <= 0 or not present:
        return []
    # slot[term id] = 1 + the term's place in the query (0: not asked); np.take over a uint16 table is the
    # fastest gather measured (0.4 ms over 366k entries, against 1.1 ms for a float64 table).
    slot = np.zeros(top + 1, dtype=np.uint16)
    slot[[t for t, _ in present]] = np.arange(1, len(present) + 1, dtype=np.uint16)
    idf_of_slot = np.array([0.0] + [w for _, w in present], dtype=np.float64)
    slots = np.take(slot, index.term_ids)
    hit = np.flatnonzero(slots.astype(np.bool_))
    rows = np.searchsorted(index.offsets, hit, side="right") - 1
    tf = index.counts[hit].astype(np.float64)
    norm = k1 * (1.0 - b + b * index.lengths[rows].astype(np.float64) / max(avgdl, 1e-9))
    contrib = idf_of_slot[slots[hit]] * tf * (k1 + 1.0) / (tf + norm)
    totals = np.bincount(rows, weights=contrib, minlength=n)
    keep = np.zeros(n, dtype=np.bool_)
    keep[rows] = True
    mask = key_mask(index.kinds, index.event_ts, kind_codes=kinds, after=after, before=before)
    if mask is not None:
        keep &= mask
    scores = np.where(keep, totals, -np.inf)
    return best_per_block(scores, index.block_pks, k)
