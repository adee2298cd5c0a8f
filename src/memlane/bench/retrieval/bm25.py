"""Okapi BM25 as the baselines use it: ``rank_bm25.BM25Okapi``, the library of the official LongMemEval
``flat-bm25``, with its defaults, written with numpy over per-document term counts.

k1 = 1.5, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)) where a negative idf (a term in more than half the
documents) is replaced by epsilon (0.25) times the mean idf of the corpus vocabulary; every occurrence of a
query term adds its term score (:func:`memlane.core.ranking.bm25.okapi_idf` and
:func:`memlane.core.ranking.bm25.term_scores`: memlane's one BM25 formula). Tokens are lower-cased ``\\w+``
words, no stemming, no stop words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memlane.core.ranking.bm25 import okapi_idf, term_scores

# rank_bm25.BM25Okapi defaults (the library of the official flat-bm25 baseline).
BM25_K1 = 1.5
BM25_B = 0.75
BM25_EPSILON = 0.25

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lower-cased ``\\w+`` words (no stemming, no stop words)."""
    return _WORD.findall(text.lower())


# ---------------------------------------------------------------------------------------------- BM25


class Vocabulary:
    """Token -> integer id, shared by every corpus of a run."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def counts(self, tokens: Sequence[str]) -> tuple[IntArray, IntArray]:
        """(sorted distinct term ids, their counts) of a document, adding new tokens."""
        ids = self._ids
        if not tokens:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        raw = np.fromiter((ids.setdefault(t, len(ids)) for t in tokens), dtype=np.int64, count=len(tokens))
        terms, counts = np.unique(raw, return_counts=True)
        return terms, counts.astype(np.int64)

    def lookup(self, tokens: Sequence[str]) -> list[int]:
        """Ids of known tokens (unknown ones appear in no document: their score is 0), repeats kept."""
        return [self._ids[t] for t in tokens if t in self._ids]


TermCounts = tuple[IntArray, IntArray]


class BM25:
    """Okapi BM25 over documents given as term counts; same scores as ``rank_bm25.BM25Okapi``."""

    def __init__(
        self, docs: Sequence[TermCounts], *, k1: float = BM25_K1, b: float = BM25_B, epsilon: float = BM25_EPSILON
    ) -> None:
        self.k1 = k1
        self.b = b
        self.n_docs = len(docs)
        self.doc_len = np.array([int(c.sum()) for _, c in docs], dtype=np.float64)
        lengths = np.array([len(t) for t, _ in docs], dtype=np.int64)
        self._doc = np.repeat(np.arange(self.n_docs, dtype=np.int64), lengths)
        self._term = np.concatenate([t for t, _ in docs]) if docs else np.zeros(0, dtype=np.int64)
        self._tf = (np.concatenate([c for _, c in docs]) if docs else np.zeros(0, dtype=np.int64)).astype(np.float64)
        self.avgdl = float(self.doc_len.mean()) if self.n_docs else 0.0
        vocab, df = np.unique(self._term, return_counts=True)
        self._vocab = vocab
        self._idf = okapi_idf(df, self.n_docs, epsilon)

    def idf(self, term: int) -> float:
        """The (floored) idf of a term id; 0 for a term in no document."""
        i = int(np.searchsorted(self._vocab, term))
        return float(self._idf[i]) if i < len(self._vocab) and self._vocab[i] == term else 0.0

    def scores(self, query: Sequence[int]) -> FloatArray:
        """BM25 score of every document for a query of term ids (each occurrence counts)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        if not query or self.n_docs == 0 or self.avgdl == 0:
            return out
        q_terms, q_counts = np.unique(np.asarray(query, dtype=np.int64), return_counts=True)
        pos = np.searchsorted(self._vocab, q_terms)
        known = (pos < len(self._vocab)) & (self._vocab[np.minimum(pos, len(self._vocab) - 1)] == q_terms)
        q_terms, q_counts, pos = q_terms[known], q_counts[known], pos[known]
        if not len(q_terms):
            return out
        mask = np.isin(self._term, q_terms)
        term, tf, doc = self._term[mask], self._tf[mask], self._doc[mask]
        at = np.searchsorted(q_terms, term)
        weight = self._idf[pos][at] * q_counts[at]
        contrib = term_scores(weight, tf, self.doc_len[doc], self.avgdl, self.k1, self.b)
        return np.bincount(doc, weights=contrib, minlength=self.n_docs).astype(np.float64)


def bm25_scores(docs: Sequence[Sequence[str]], query: Sequence[str], **params: float) -> FloatArray:
    """BM25 scores of tokenized documents for a tokenized query (a convenience for small inputs)."""
    vocab = Vocabulary()
    index = BM25([vocab.counts(d) for d in docs], **params)
    return index.scores(vocab.lookup(query))
