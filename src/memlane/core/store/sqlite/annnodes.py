"""One graph node per distinct vector in the SQLite store's approximate index (:mod:`memlane.core.store.sqlite.ann`).

A user whose blocks repeat the same texts holds many keys with exactly the same stored vector (the same
int8 values and the same scale: the same text embeds to the same vector, and quantizing is a function of
it). As separate HNSW nodes, such copies make tight clusters of points at distance zero from each other
that a greedy walk does not leave, and a search for the top few nodes returns copies of one vector
instead of the next vectors. So the index holds one node per distinct vector, labelled with the pk of
the first key that carried it, and a :class:`KeyMap` says which keys each node stands for: a search
expands the nodes it finds into all their keys, and the store's matrix then keeps the live ones.

A map where every node stands for its own key alone (distinct vectors, or an index saved before maps
existed) is not kept: ``None`` means label = key pk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memlane.core.store.candidates.vectors import UserMatrix

_CHUNK = 4096  # rows compared at a time when checking copies


@dataclass(frozen=True)
class KeyMap:
    """The keys each node stands for: key ``pks[i]`` is a copy of node ``labels[i]``'s vector; sorted by
    label, then pk. Every key the index was built or extended with is listed, deleted ones too (the
    matrix leaves those out of an answer), so its size is the ``keys`` of the index's row."""

    labels: npt.NDArray[np.int64]
    pks: npt.NDArray[np.int64]

    @classmethod
    def of(cls, labels: npt.NDArray[np.int64], pks: npt.NDArray[np.int64]) -> KeyMap:
        order = np.lexsort((pks, labels))
        return cls(np.ascontiguousarray(labels[order]), np.ascontiguousarray(pks[order]))

    @property
    def size(self) -> int:
        return int(self.pks.shape[0])

    def expand(self, found: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The keys of the nodes ``found`` (a label the map does not hold stands for nothing)."""
        lo = np.searchsorted(self.labels, found, side="left")
        hi = np.searchsorted(self.labels, found, side="right")
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        # The ranges [lo, hi) one after the other: each range's start, repeated over its length, plus
        # the position within it.
        ends = np.cumsum(counts)
        at = np.repeat(lo - (ends - counts), counts) + np.arange(total)
        return self.pks[at]

    def expand_nearest(self, found: npt.NDArray[np.int64], budget: int) -> tuple[npt.NDArray[np.int64], bool]:
        """The keys of the first nodes of ``found`` (nearest first) that hold at least ``budget`` keys
        together (every node whole), and whether those were all of ``found``."""
        lo = np.searchsorted(self.labels, found, side="left")
        counts = np.searchsorted(self.labels, found, side="right") - lo
        take = int(np.searchsorted(np.cumsum(counts), budget, side="left")) + 1
        return self.expand(found[:take]), take >= found.shape[0]

    def label_of(self, pks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each key's node label, -1 for a key the map does not hold."""
        out = np.full(pks.shape[0], -1, dtype=np.int64)
        if self.size == 0:
            return out
        order = np.argsort(self.pks, kind="stable")
        at = np.minimum(np.searchsorted(self.pks[order], pks), self.size - 1)
        hit = self.pks[order[at]] == pks
        out[hit] = self.labels[order[at[hit]]]
        return out


def first_copies(matrix: UserMatrix) -> npt.NDArray[np.int64]:
    """For each row of the matrix, the first row holding exactly the same stored vector (the same int8
    values and scale); a row that is the first of its kind is its own. Rows are grouped by a hash of their
    bytes, then compared in full, so a hash collision only leaves two vectors apart."""
    n = matrix.n
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    vectors, scales = matrix.vectors, matrix.scales
    hashes = np.fromiter((hash(vectors[i].tobytes()) for i in range(n)), dtype=np.int64, count=n)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)  # first: stable
    rep = first[inverse.reshape(-1)].astype(np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        r = rep[start:stop]
        same = (vectors[r] == vectors[start:stop]).all(axis=1) & (scales[r] == scales[start:stop])
        r[~same] = np.arange(start, stop, dtype=np.int64)[~same]
    return rep


def map_path(index_path: Path) -> Path:
    """The map file saved beside an index file (``u<user>-<token>.keys`` beside ``.hnsw``)."""
    return index_path.with_suffix(".keys")


def save_map(keys: KeyMap, path: Path) -> None:
    """Write the map (fsynced) to ``path``."""
    with open(path, "wb") as fh:
        np.save(fh, np.stack([keys.labels, keys.pks]), allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def load_map(path: Path) -> KeyMap | None:
    """The map saved at ``path``, or None if it is not a well-formed map (the index is then rebuilt)."""
    try:
        with open(path, "rb") as fh:
            got = np.load(fh, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if got.ndim != 2 or got.shape[0] != 2 or got.dtype != np.int64:
        return None
    labels, pks = np.ascontiguousarray(got[0]), np.ascontiguousarray(got[1])
    if labels.shape[0] and bool((np.diff(labels) < 0).any()):
        return None
    return KeyMap(labels, pks)
