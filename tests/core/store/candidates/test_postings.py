"""The keyword stage's postings: a query reads the entries of its own terms, and gets exactly what a gather
over every entry of the user gives, however many entries came after the postings were built."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from memlane.core.ranking.bm25 import BM25_B, BM25_K1, term_scores
from memlane.core.store.candidates.terms import Postings, UserTerms, bm25_top_blocks, session_code, session_word_counts
from memlane.core.store.candidates.vectors import KIND_CODES, KeyRules

VOCAB = 300


def random_terms(rng: np.random.Generator, n: int, first_block: int, version: int) -> UserTerms:
    """``n`` keys with Zipf-ish bags, a few keys per block, a handful of sessions."""
    sizes = rng.integers(0, 12, n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    term_ids = np.concatenate(
        [np.sort(rng.choice(VOCAB, size=int(c), replace=False, p=_zipf())) for c in sizes] or [np.zeros(0)]
    ).astype(np.int32)
    counts = rng.integers(1, 4, term_ids.shape[0]).astype(np.uint16)
    lengths = np.bincount(np.repeat(np.arange(n), sizes), weights=counts, minlength=n).astype(np.float32)
    return UserTerms(
        version=version,
        block_pks=(first_block + np.arange(n) // 2).astype(np.int64),
        kinds=rng.integers(0, len(KIND_CODES), n).astype(np.int8),
        event_ts=rng.uniform(0, 1000, n),
        lengths=lengths,
        offsets=offsets,
        term_ids=term_ids,
        counts=counts,
        sessions=np.array([session_code(f"s{i}") for i in rng.integers(0, 6, n)], dtype=np.int64),
        words_lengths=lengths.copy(),
        words_offsets=offsets.copy(),
        words_term_ids=term_ids.copy(),
        words_counts=counts.copy(),
    )


def _zipf() -> npt.NDArray[np.float64]:
    w = 1.0 / np.arange(1, VOCAB + 1)
    return np.asarray(w / w.sum(), dtype=np.float64)


def reference_top(
    index: UserTerms, query: list[tuple[int, float]], avgdl: float, k: int, after: float | None
) -> list[tuple[int, float]]:
    """BM25 over every entry, ties by key position, one hit per block: what the stage must return."""
    weight = dict(query)
    totals: dict[int, float] = {}
    for key in range(index.block_pks.shape[0]):
        if after is not None and index.event_ts[key] < after:
            continue
        lo, hi = int(index.offsets[key]), int(index.offsets[key + 1])
        entries = [e for e in range(lo, hi) if int(index.term_ids[e]) in weight]
        if not entries:
            continue
        contrib = term_scores(
            np.array([weight[int(index.term_ids[e])] for e in entries]),
            index.counts[entries].astype(np.float64),
            np.full(len(entries), float(index.lengths[key])),
            avgdl,
            BM25_K1,
            BM25_B,
        )
        totals[key] = float(np.bincount(np.zeros(len(entries), dtype=np.int64), weights=contrib)[0])
    out: dict[int, float] = {}
    for key in sorted(totals, key=lambda j: (-totals[j], j)):
        out.setdefault(int(index.block_pks[key]), totals[key])
    return list(out.items())[:k]


@pytest.mark.parametrize("seed", range(12))
def test_the_stage_equals_a_gather_over_every_entry_with_and_without_a_tail(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = random_terms(rng, 400, 0, 1)
    for step in range(4):
        query = [(int(t), float(rng.uniform(0.1, 3.0))) for t in rng.choice(VOCAB + 20, 3, replace=False)]
        after = None if step % 2 == 0 else 500.0
        got = bm25_top_blocks(index, query, 5.0, 10, KeyRules(after=after))
        assert got == reference_top(index, query, 5.0, 10, after)
        # Every entry the postings do not cover yet is scanned: append a tail, then one that forces a rebuild.
        more = random_terms(rng, 50 if step < 2 else 3000, 10_000 * (step + 1), index.version + 1)
        index = index.appended(more)


def test_hits_are_the_entries_of_the_asked_terms_in_order() -> None:
    rng = np.random.default_rng(5)
    term_ids = rng.integers(0, 50, 2000).astype(np.int32)
    postings = Postings.build(term_ids[:1500])
    assert postings.fresh(2000) and not postings.fresh(1500 + 8193)
    for _ in range(20):
        slot = np.zeros(int(rng.integers(1, 60)), dtype=np.uint16)
        slot[rng.choice(slot.shape[0], min(3, slot.shape[0]), replace=False)] = 1
        table = np.zeros(60, dtype=np.uint16)
        table[: slot.shape[0]] = slot
        expected = np.flatnonzero(np.take(table, term_ids))
        assert postings.hits(term_ids, slot).tolist() == expected.tolist()


def test_session_word_counts_are_the_same_from_postings_and_from_a_tail() -> None:
    rng = np.random.default_rng(9)
    base = random_terms(rng, 300, 0, 1)
    more = random_terms(rng, 40, 5000, 2)
    whole = UserTerms(**{f: getattr(base.appended(more), f) for f in _FIELDS})  # postings over everything
    grown = base
    grown.postings(), grown.words_postings()  # postings over the first 300 keys only
    grown = grown.appended(more)
    query, sessions = [1, 2, 7, 40], ["s1", "s4"]
    one, other = session_word_counts(whole, query, sessions), session_word_counts(grown, query, sessions)
    assert one is not None and other is not None
    assert np.array_equal(one.tf, other.tf) and one.rows == other.rows and len(one.rows) == 2


_FIELDS = (
    "version", "block_pks", "kinds", "event_ts", "lengths", "offsets", "term_ids", "counts", "sessions",
    "words_lengths", "words_offsets", "words_term_ids", "words_counts",
)  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
def test_an_appended_session_layout_is_the_one_computed_from_scratch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    index = random_terms(rng, 200, 0, 1)
    index.session_layout  # computed, so appends extend it  # noqa: B018
    for step in range(6):
        more = random_terms(rng, int(rng.integers(1, 5)), 1000 * (step + 1), index.version + 1)
        if step % 2:  # a session the user has never had
            kept = {f: getattr(more, f) for f in _FIELDS if f != "sessions"}
            more = UserTerms(**kept, sessions=more.sessions + 7 + step)
        index = index.appended(more)
        assert "session_layout" in index.__dict__
        fresh = UserTerms(**{f: getattr(index, f) for f in _FIELDS}).session_layout
        got = index.session_layout
        for name in ("codes", "of_key", "lengths"):
            assert np.array_equal(getattr(got, name), getattr(fresh, name)), name
        assert (got.n_with_words, got.avgdl, got.max_term) == (fresh.n_with_words, fresh.avgdl, fresh.max_term)
