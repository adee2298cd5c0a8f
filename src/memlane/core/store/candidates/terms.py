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
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.core.ranking.bm25 import BM25_B, BM25_K1, term_scores
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.candidates.columns import Column, capacity_bytes, extended_all
from memlane.core.store.candidates.vectors import EVERY_KEY, KeyRules, best_per_block, key_mask


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

    @classmethod
    def of(
        cls,
        codes: npt.NDArray[np.int64],
        of_key: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.float64],
        max_term: int,
    ) -> SessionLayout:
        """The layout with what follows from the sessions' lengths: how many have words, and their mean."""
        with_words = lengths > 0
        return cls(
            codes=codes,
            of_key=of_key,
            lengths=lengths,
            n_with_words=int(with_words.sum()),
            avgdl=float(lengths[with_words].mean()) if with_words.any() else 0.0,
            max_term=max_term,
        )

    def extended(
        self,
        sessions: npt.NDArray[np.int64],
        words_lengths: npt.NDArray[np.float32],
        words_term_ids: npt.NDArray[np.int32],
    ) -> SessionLayout:
        """The layout once keys of ``sessions`` (with their words' lengths and terms) are appended: what
        :attr:`UserTerms.session_layout` computes from scratch, at the cost of the new keys and the
        sessions instead of a sort of every key (70 ms at a million keys, after every add)."""
        codes, of_key, lengths = self.codes, self.of_key, self.lengths
        new_codes = np.unique(sessions)
        at = np.minimum(np.searchsorted(codes, new_codes), max(codes.shape[0] - 1, 0))
        missing = new_codes if codes.shape[0] == 0 else new_codes[codes[at] != new_codes]
        if missing.size:  # new sessions: the later sessions' indexes shift
            merged = np.union1d(codes, missing)
            moved = np.searchsorted(merged, codes)
            of_key = moved[of_key]
            grown = np.zeros(merged.shape[0], dtype=np.float64)
            grown[moved] = lengths
            codes, lengths = merged, grown
        else:
            lengths = lengths.copy()
        idx = np.searchsorted(codes, sessions)
        np.add.at(lengths, idx, words_lengths.astype(np.float64))  # in key order, as bincount sums
        top = max(self.max_term, int(words_term_ids.max()) if words_term_ids.size else -1)
        return SessionLayout.of(codes, np.concatenate([of_key, idx]), lengths, top)


# Entries appended after the postings were built are scanned directly until they reach this share of the
# covered entries (or the floor), then the postings are rebuilt: an add costs no rebuild, and the scan of
# the tail stays a small part of a search.
_TAIL_SHARE = 8
_TAIL_FLOOR = 8192


@dataclass(frozen=True)
class Postings:
    """An inverted view of the first ``covered`` entries of a bag array (``term_ids``): the entries that
    hold term ``t`` are ``order[starts[t]:starts[t + 1]]``, ascending. A query then touches the entries of
    its own terms instead of gathering over every entry of the user."""

    order: npt.NDArray[np.int32]
    starts: npt.NDArray[np.int64]
    covered: int

    @classmethod
    def build(cls, term_ids: npt.NDArray[np.int32]) -> Postings:
        order = np.argsort(term_ids, kind="stable").astype(np.int32)
        counts = np.bincount(term_ids) if term_ids.size else np.zeros(0, dtype=np.int64)
        starts = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return cls(order=order, starts=starts, covered=int(term_ids.shape[0]))

    @classmethod
    def serving(cls, current: Postings | None, term_ids: npt.NDArray[np.int32]) -> Postings:
        """``current`` if it may serve ``term_ids`` (:meth:`fresh`), else postings built over all of them."""
        if current is None or not current.fresh(term_ids.shape[0]):
            return cls.build(term_ids)
        return current

    def fresh(self, total: int) -> bool:
        """Whether these postings may serve an array of ``total`` entries (the rest is scanned)."""
        return total - self.covered <= max(_TAIL_FLOOR, self.covered // _TAIL_SHARE)

    def hits(self, term_ids: npt.NDArray[np.int32], slot: npt.NDArray[np.uint16]) -> npt.NDArray[np.int64]:
        """The entries of ``term_ids`` whose term has a non-zero ``slot`` (a table by term id), ascending:
        what ``np.flatnonzero(np.take(slot, term_ids))`` gives, without reading every entry."""
        known = min(slot.shape[0], self.starts.shape[0] - 1)
        wanted = np.flatnonzero(slot[:known])
        parts = [self.order[self.starts[t] : self.starts[t + 1]] for t in wanted.tolist()]
        tail = term_ids[self.covered :]
        if tail.size:
            in_table = tail < slot.shape[0]
            picked = np.zeros(tail.shape[0], dtype=np.bool_)
            picked[in_table] = np.take(slot, tail[in_table]).astype(np.bool_)
            parts.append((np.flatnonzero(picked) + self.covered).astype(np.int32))
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate(parts)).astype(np.int64)

    @property
    def nbytes(self) -> int:
        return int(self.order.nbytes + self.starts.nbytes)


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
    # Inverted views of term_ids and words_term_ids, built at the first search and handed on to the
    # appended copies (they cover a prefix of the entries: see Postings.fresh).
    _postings: Postings | None = field(default=None, init=False, repr=False, compare=False)
    _words_postings: Postings | None = field(default=None, init=False, repr=False, compare=False)
    # The buffers the arrays live in once a write extended them (memlane.core.store.candidates.columns), by field.
    _columns: dict[str, Column] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _arrays(self) -> dict[str, npt.NDArray[Any]]:
        return {name: getattr(self, name) for name in _TERM_COLUMNS}

    @property
    def nbytes(self) -> int:
        """The arrays' memory (their buffers' room to grow included) and the postings' whether built yet or
        not (4 bytes an entry)."""
        postings = 4 * int(self.term_ids.shape[0] + self.words_term_ids.shape[0])
        return capacity_bytes(self._arrays(), self._columns) + postings

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
        first = np.ones(ordered.shape[0], dtype=np.bool_)
        first[1:] = ordered[1:] != ordered[:-1]
        top = int(self.words_term_ids.max()) if self.words_term_ids.size else -1
        return SessionLayout.of(ordered[first], of_key, lengths, top)

    @property
    def max_term(self) -> int:
        """The largest term id a key holds (-1: none), from the postings and the entries after them."""
        postings = self.postings()
        tail = self.term_ids[postings.covered :]
        return int(max(postings.starts.shape[0] - 2, int(tail.max()) if tail.size else -1))

    def postings(self) -> Postings:
        """The keys' postings (built now if missing, or if too many entries came after them)."""
        self._postings = Postings.serving(self._postings, self.term_ids)
        return self._postings

    def words_postings(self) -> Postings:
        """The people's words' postings, as :meth:`postings`."""
        self._words_postings = Postings.serving(self._words_postings, self.words_term_ids)
        return self._words_postings

    def appended(self, other: UserTerms) -> UserTerms:
        """These keys with ``other``'s after them, extended in place where the buffers allow
        (:func:`memlane.core.store.candidates.columns.extended`): an add does not copy the user."""
        extra = other._arrays()
        extra["offsets"] = other.offsets[1:] + self.offsets[-1]
        extra["words_offsets"] = other.words_offsets[1:] + self.words_offsets[-1]
        arrays, columns = extended_all(self._arrays(), self._columns, extra)
        out = UserTerms(version=other.version, **arrays)
        out._columns = columns
        # The entries keep their places, so the postings stay true for the prefix they cover.
        out._postings, out._words_postings = self._postings, self._words_postings
        layout = self.__dict__.get("session_layout")  # computed already (a cached_property)
        if layout is not None:
            out.__dict__["session_layout"] = layout.extended(other.sessions, other.words_lengths, other.words_term_ids)
        return out


_TERM_COLUMNS = (
    "block_pks", "kinds", "event_ts", "lengths", "offsets", "term_ids", "counts", "sessions",
    "words_lengths", "words_offsets", "words_term_ids", "words_counts",
)  # fmt: skip


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
    rules: KeyRules = EVERY_KEY,
    *,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[tuple[int, float]]:
    """BM25 top-k blocks (a block scores as its best key) for ``query`` = (term id, idf) pairs.

    Only keys holding at least one query term and kept by ``rules`` are ranked; the rules narrow the ranked
    keys, not the statistics. The user's postings (:class:`Postings`) give the entries of the query's terms, so a search
    costs what its terms hold, not what the user holds.
    """
    n = index.block_pks.shape[0]
    if n == 0 or k <= 0:
        return []
    top = index.max_term
    present = [(term_id, w) for term_id, w in query if 0 <= term_id <= top]
    if not present:
        return []
    # slot[term id] = 1 + the term's place in the query (0: not asked)
    slot = np.zeros(top + 1, dtype=np.uint16)
    slot[[t for t, _ in present]] = np.arange(1, len(present) + 1, dtype=np.uint16)
    idf_of_slot = np.array([0.0] + [w for _, w in present], dtype=np.float64)
    hit = index.postings().hits(index.term_ids, slot)
    if hit.size == 0:
        return []
    slots = np.take(slot, index.term_ids[hit])
    rows = np.searchsorted(index.offsets, hit, side="right") - 1  # ascending, a key's entries together
    tf = index.counts[hit].astype(np.float64)
    lengths = index.lengths[rows].astype(np.float64)
    contrib = term_scores(idf_of_slot[slots], tf, lengths, max(avgdl, 1e-9), k1, b)
    starts = np.ones(rows.shape[0], dtype=np.bool_)
    starts[1:] = rows[1:] != rows[:-1]
    keys = rows[starts]  # the keys hit, ascending
    totals = np.bincount(np.cumsum(starts) - 1, weights=contrib).astype(np.float64)  # in entry order, per key
    block_pks = index.block_pks[keys] if rules.blocks is not None else None
    mask = key_mask(index.kinds[keys], index.event_ts[keys], rules, block_pks)
    scores = totals if mask is None else np.where(mask, totals, -np.inf)
    return best_per_block(scores, index.block_pks[keys], k)


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
    hit = index.words_postings().hits(index.words_term_ids, slot)
    if hit.size == 0:
        return None
    slots = np.take(slot, index.words_term_ids[hit])
    keys = np.searchsorted(index.words_offsets, hit, side="right") - 1
    cell = of_key[keys] * len(present) + (slots.astype(np.int64) - 1)
    counted = np.bincount(cell, weights=index.words_counts[hit], minlength=n_sessions * len(present))
    tf = np.asarray(counted, dtype=np.float64)  # already float64 (weighted counts): no copy
    wanted = np.array([session_code(s) for s in sessions], dtype=np.int64)
    at = np.minimum(np.searchsorted(layout.codes, wanted), layout.codes.shape[0] - 1)
    found = layout.codes[at] == wanted
    rows = {s: int(row) for s, row, ok in zip(sessions, at.tolist(), found.tolist(), strict=True) if ok}
    return SessionWordCounts(tf.reshape(n_sessions, len(present)), lengths, layout.n_with_words, layout.avgdl, rows)
