"""The session-words ranking: a user's sessions ranked by BM25 over what the people in them said.

What a session's words are (:func:`people_words`), and how its counts become ranks
(:func:`session_word_ranks`) are here; a store gives the counts (:class:`SessionWordCounts`: its
``session_word_counts``), and the search pipeline turns the ranks into gains
(:func:`memlane.core.retrieval.rescore`).

A session is the sum of its blocks' people's words. Statistics are the user's own: N is the number of the
user's sessions with words, a term's document frequency the number of them holding it, idf FTS5's (floored
at 1e-6), k1 1.5 and b 0.75 (:mod:`memlane.core.ranking.bm25`). The whole haystack of a session-level ranking
is one user's sessions, so no other user's text belongs in it (unlike the keys' BM25, whose per-user
statistics measured worse).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from memlane.core.exchanges import EXCHANGE_PERSPECTIVE
from memlane.core.model import ASSISTANT_ROLE, USER_ROLE, PerspectiveMode
from memlane.core.ranking.bm25 import WORDS_B, WORDS_K1, idf, term_scores

K = TypeVar("K", bound=Hashable)


def people_words(message: str, mode: PerspectiveMode | str, perspective: str) -> str:
    """What the people in a block's exchange said, not an assistant: the text behind the session-words
    ranking (:class:`memlane.core.retrieval.SearchSettings`), counted once per exchange.

    * ``single`` and ``dual``: the user's turn, on the exchange's block (``single``) or its user block
      (``dual``); an exchange opened by the assistant (a greeting) has none, and neither has a dual
      assistant block. Replies are left out: an assistant's long answers drown what the user talked about.
    * ``speakers``: both speakers' turns (two people, no assistant), on the first speaker's block.

    Read from the stored message (``role: content`` lines, :meth:`memlane.core.model.Exchange.text`), so
    stores written before the ranking existed get the same words. One case reads short: a user turn that
    itself contains a line starting ``assistant: `` is cut there. The PostgreSQL store's migration 2 has
    the same rule in SQL.
    """
    mode = PerspectiveMode(mode)
    if mode is PerspectiveMode.SPEAKERS:
        return message if message.startswith(f"{perspective}: ") else ""
    if perspective not in (USER_ROLE, EXCHANGE_PERSPECTIVE) or not message.startswith(f"{USER_ROLE}: "):
        return ""
    return message[len(USER_ROLE) + 2 :].split(f"\n{ASSISTANT_ROLE}: ", 1)[0]


@dataclass(frozen=True)
class SessionWordCounts:
    """What a store gives the session-words ranking for one query: the query terms' counts in the user's
    sessions (``tf``, one row per session, one column per distinct query term; sessions holding none of
    them may be left out), each row's session length in words (``lengths``), the number of the user's
    sessions with words (``n_sessions``) and their mean length (``avgdl``), and the row of each asked
    session the user has (``rows``)."""

    tf: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.float64]
    n_sessions: int
    avgdl: float
    rows: Mapping[str, int]


def session_word_ranks(counts: SessionWordCounts | None, *, k1: float = WORDS_K1, b: float = WORDS_B) -> dict[str, int]:
    """The rank of each asked session (``counts.rows``) among the user's sessions by BM25 over their
    people's words (1 = best, ties share a rank: :func:`ranks_of`); sessions that match no term get none,
    and so does every session when ``counts`` is None (no query term, no session)."""
    if counts is None or not counts.rows or counts.n_sessions == 0 or counts.tf.size == 0:
        return {}
    weights = idf((counts.tf > 0).sum(axis=0).astype(np.float64), counts.n_sessions)
    scores = term_scores(weights[None, :], counts.tf, counts.lengths[:, None], counts.avgdl, k1, b).sum(axis=1)
    rank = rank_array(scores)
    got = ((s, int(rank[row])) for s, row in counts.rows.items())
    return {s: r for s, r in got if r > 0}


def ranks_of(scores: Mapping[K, float]) -> dict[K, int]:
    """Each positive score's rank, 1 + how many scores are higher (ties share a rank, so the ranks of
    both stores agree whatever order their sessions come in); scores of 0 or less get none."""
    keys = list(scores)
    ranks = rank_array(np.array([scores[k] for k in keys], dtype=np.float64))
    return {k: int(r) for k, r in zip(keys, ranks.tolist(), strict=True) if r > 0}


def rank_array(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """:func:`ranks_of` for an array: 0 where the score is not positive."""
    ordered = np.sort(scores[scores > 0])
    ranks = 1 + ordered.shape[0] - np.searchsorted(ordered, scores, side="right")
    return np.where(scores > 0, ranks, 0)
