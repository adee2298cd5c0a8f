"""BM25: the one place its arithmetic is written.

Every BM25 in memlane scores a term of a document as ``weight x tf x (k1 + 1) / (tf + k1 x (1 - b + b x dl /
avgdl))`` (:func:`term_scores`), where ``weight`` is the term's idf (times how often the query repeats it,
where it counts repeats) and ``dl`` the document's length. They differ in their documents and statistics:

* the keyword retriever: documents are a user's search keys, statistics the store's (SQLite:
  :mod:`memlane.core.store.candidates.terms`; PostgreSQL computes the same expression in SQL,
  :func:`sql_term_score`);
* the session-words ranking: documents are a user's sessions, statistics the user's
  (:mod:`memlane.core.ranking.session_words`);
* the benchmarks' Okapi baseline (``rank_bm25.BM25Okapi``'s variant of the idf, :func:`okapi_idf`).

The idf of the first two is FTS5's, ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6 (:func:`idf`). The stores
give the counts (document frequencies, lengths, term counts); the formula is here.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

BM25_K1 = 1.2  # FTS5's, and the usual defaults
BM25_B = 0.75
IDF_FLOOR = 1e-6
# BM25 over sessions' people's words (documents of a few hundred to a few thousand words, unlike the keys).
WORDS_K1 = 1.5
WORDS_B = 0.75

FloatArray = npt.NDArray[np.float64]


def idf(df: FloatArray, n_docs: int) -> FloatArray:
    """FTS5's BM25 idf, floored so a term in most documents still counts a little (never negatively)."""
    raw = np.log((n_docs - df + 0.5) / (df + 0.5))
    return np.maximum(raw, IDF_FLOOR)


def okapi_idf(df: FloatArray, n_docs: int, epsilon: float) -> FloatArray:
    """``rank_bm25.BM25Okapi``'s idf: ln(N - n + 0.5) - ln(n + 0.5), where a negative one (a term in more
    than half the documents) is replaced by ``epsilon`` times the mean idf of the vocabulary ``df`` lists."""
    raw = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    if len(raw):
        raw = np.where(raw < 0, epsilon * float(raw.mean()), raw)
    return raw


def term_scores(
    weights: FloatArray | float,
    tf: FloatArray,
    lengths: FloatArray,
    avgdl: float,
    k1: float,
    b: float,
) -> FloatArray:
    """BM25's score of each (term, document) entry: ``weights`` (the terms' idf, or idf x query repeats),
    ``tf`` the term's count in the document, ``lengths`` the document's length; arrays broadcast together.

    Written in one order of operations so every caller gets the same bits for the same numbers."""
    return weights * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths / avgdl))


def sql_idf(n_docs: str, df: str) -> str:
    """:func:`idf` as an SQL expression over the SQL expressions ``n_docs`` and ``df`` (PostgreSQL)."""
    return f"greatest(ln(({n_docs} - {df} + 0.5) / ({df} + 0.5)), {IDF_FLOOR:g})"


def sql_term_score(weight: str, tf: str, length: str, avgdl: str, k1: str, b: str) -> str:
    """:func:`term_scores` as an SQL expression over SQL expressions (PostgreSQL), in the same order."""
    return f"{weight} * {tf} * ({k1} + 1) / ({tf} + {k1} * (1 - {b} + {b} * {length} / {avgdl}))"
