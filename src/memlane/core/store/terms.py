"""BM25 over per-user term indexes held in memory, with the store's global statistics.

Why not FTS5's own ``bm25()``: it counts each query term's document frequency by walking the term's
whole posting list across *all* users, which is 24 of a 25 ms query on a 1.3M-key store (matching the
user's rows alone takes 1.2 ms). Here the store keeps document frequencies in a table updated by every
write, and each user's (key, term, count) rows are cached like the key vectors, so a query costs what the
user's memory costs, not what the whole store costs.

The statistics stay global (per file), as FTS5's were: measured, per-user document frequencies from a few
hundred exchanges rank worse (docs/design/003-retrieval.md). The formula is BM25's
(:mod:`memlane.core.ranking.bm25`), with k1 and b as arguments (FTS5 fixed them at 1.2 and 0.75; the search
presets choose them, :class:`memlane.core.retrieval.SearchSettings`). The same arrays give the
session-words ranking its counts (:func:`session_word_counts`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from memlane.core.ranking.bm25 import BM25_B, BM25_K1, term_scores
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.vectors import best_per_block, key_mask


@dataclass(frozen=True)
class SessionLayout:
    """The user's sessions by index: their codes, ascending (``codes``), each key's session (``of_key``),
    each session's words (``lengths``); the number of sessions with words and their mean length; the
    largest word term id."""

    codes: npt.NDArray[np.int64]
    of_key: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.float64]
    n_with_words: int
    avgdl: float
    max_term: int


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
    # The people's words of each key's block (only on message keys,
    # :func:`memlane.core.ranking.session_words.people_words`), as bags the same way, and each key's session
    # as a code (:func:`session_code`).
    sessions: npt.NDArray[np.int64]
    words_lengths: npt.NDArray[np.float32]
    words_offsets: npt.NDArray[np.int64]
    words_term_ids: npt.NDArray[np.int32]
    words_counts: npt.NDArray[np.uint16]

    def _arrays(self) -> tuple[npt.NDArray[np.generic], ...]:
        return (
            self.block_pks, self.kinds, self.event_ts, self.lengths, self.offsets, self.term_ids, self.counts,
            self.sessions, self.words_lengths, self.words_offsets, self.words_term_ids, self.words_counts,
        )  # fmt: skip

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self._arrays()))

    @cached_property
    def session_layout(self) -> SessionLayout:
        """The user's sessions as the session-words ranking reads them, computed once per cached index."""
        # np.unique(return_inverse=True) written out: a third of its time on a 2,500-key user
        order = np.argsort(self.sessions)
        ordered = self.sessions[order]
        starts = np.empty(ordered.shape[0], dtype=np.int64)
        if ordered.shape[0]:
            starts[0] = 0
            np.cumsum(ordered[1:] != ordered[:-1], out=starts[1:])
        of_key = np.empty_like(starts)
        of_key[order] = starts
        n_sessions = int(starts[-1]) + 1 if starts.shape[0] else 0
        lengths = np.bincount(of_key, weights=self.words_lengths, minlength=n_sessions).astype(np.float64)
        with_words = lengths > 0
        first = np.ones(ordered.shape[0], dtype=np.bool_)
        first[1:] = ordered[1:] != ordered[:-1]
        return SessionLayout(
            codes=ordered[first],
            of_key=of_key,
            lengths=lengths,
            n_with_words=int(with_words.sum()),
            avgdl=float(lengths[with_words].mean()) if with_words.any() else 0.0,
            max_term=int(self.words_term_ids.max()) if self.words_term_ids.size else -1,
        )

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
            sessions=np.concatenate([self.sessions, other.sessions]),
            words_lengths=np.concatenate([self.words_lengths, other.words_lengths]),
            words_offsets=np.concatenate([self.words_offsets, other.words_offsets[1:] + self.words_offsets[-1]]),
            words_term_ids=np.concatenate([self.words_term_ids, other.words_term_ids]),
            words_counts=np.concatenate([self.words_counts, other.words_counts]),
        )


def encode_bag(bag: dict[int, int]) -> tuple[bytes, bytes]:
    """A key's term bag as stored: term ids (int32) and counts (uint16, saturating), in id order."""
    ids = np.fromiter(sorted(bag), dtype=np.int32, count=len(bag))
    counts = np.fromiter((min(bag[i], 65535) for i in ids.tolist()), dtype=np.uint16, count=len(bag))
    return ids.tobytes(), counts.tobytes()


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
    lengths = index.lengths[rows].astype(np.float64)
    contrib = term_scores(idf_of_slot[slots[hit]], tf, lengths, max(avgdl, 1e-9), k1, b)
    totals = np.bincount(rows, weights=contrib, minlength=n)
    keep = np.zeros(n, dtype=np.bool_)
    keep[rows] = True
    mask = key_mask(index.kinds, index.event_ts, kind_codes=kinds, after=after, before=before)
    if mask is not None:
        keep &= mask
    scores = np.where(keep, totals, -np.inf)
    return best_per_block(scores, index.block_pks, k)


def session_code(session_id: str) -> int:
    """A session id as a signed 64-bit code: how the SQLite store tells a user's sessions apart in its
    arrays (a collision needs about 4 billion sessions in one user's memory to become likely)."""
    return int.from_bytes(hashlib.blake2b(session_id.encode(), digest_size=8).digest(), "little", signed=True)


def session_word_counts(index: UserTerms, query: Sequence[int], sessions: Sequence[str]) -> SessionWordCounts | None:
    """The counts the session-words ranking (:func:`memlane.core.ranking.session_words.session_word_ranks`)
    needs for the query terms ``query`` (term ids) and the asked ``sessions`` (ids): every session of the
    user is a row; None when nothing can match (no session, no query term the user's words hold)."""
    if not sessions or index.block_pks.shape[0] == 0:
        return None
    layout = index.session_layout
    of_key, lengths, top = layout.of_key, layout.lengths, layout.max_term
    n_sessions = lengths.shape[0]
    present = sorted({t for t in query if 0 <= t <= top})
    if layout.n_with_words == 0 or not present:
        return None
    slot = np.zeros(top + 1, dtype=np.uint16)
    slot[present] = np.arange(1, len(present) + 1, dtype=np.uint16)
    slots = np.take(slot, index.words_term_ids)
    hit = np.flatnonzero(slots.astype(np.bool_))
    if hit.size == 0:
        return None
    keys = np.searchsorted(index.words_offsets, hit, side="right") - 1
    cell = of_key[keys] * len(present) + (slots[hit].astype(np.int64) - 1)
    counted = np.bincount(cell, weights=index.words_counts[hit], minlength=n_sessions * len(present))
    tf = np.asarray(counted, dtype=np.float64)  # already float64 (weighted counts): no copy
    wanted = np.array([session_code(s) for s in sessions], dtype=np.int64)
    at = np.minimum(np.searchsorted(layout.codes, wanted), layout.codes.shape[0] - 1)
    found = layout.codes[at] == wanted
    rows = {s: int(row) for s, row, ok in zip(sessions, at.tolist(), found.tolist(), strict=True) if ok}
    return SessionWordCounts(tf.reshape(n_sessions, len(present)), lengths, layout.n_with_words, layout.avgdl, rows)
