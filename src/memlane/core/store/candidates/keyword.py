r"""The words of a keyword query: what both stores' BM25 searches for.

Words are ``\w+`` runs, lower-cased, stopwords dropped; each store then tokenizes them like its keys (the
SQLite store with FTS5's tokenizer, PostgreSQL with its text search configuration). No query syntax
survives: ``-``, ``:``, ``AND`` or ``NEAR`` in a query are plain words or separators.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 64

# Words so common that OR-ing them in only slows the query; BM25 would weigh them near zero anyway.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    ]
)


def query_terms(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stopwords, first occurrence order, at most MAX_TERMS."""
    terms: list[str] = []
    for w in _WORD.findall(text.lower()):
        if w not in STOPWORDS and w not in terms:
            terms.append(w)
    if not terms:  # a query of stopwords only still deserves an answer
        terms = list(dict.fromkeys(_WORD.findall(text.lower())))
    return terms[:MAX_TERMS]
