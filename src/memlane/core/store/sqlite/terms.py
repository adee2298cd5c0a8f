"""The SQLite store's keyword index: term ids with document frequencies, per-key term bags, totals.

Tables (migration 3): ``terms(id, term, df)`` with df = keys holding the term, across all users;
``key_terms`` (clustered by user, like ``key_vectors``) holds each key's term ids and counts; ``corpus``
holds the key count and token total (BM25's N and average length). Every write changes them in the
transaction that writes the keys, so the statistics never drift from the keys. A term no key holds any
more is deleted, so a deleted user's words do not linger in the vocabulary.

Tokens are exactly those of SQLite's FTS5 tokenizer ``porter unicode61 remove_diacritics 2`` (the one the
store used before): :mod:`memlane.core.store.sqlite.tokenizer`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memlane.core.ranking.bm25 import idf
from memlane.core.store.candidates.keyword import query_terms
from memlane.core.store.candidates.terms import encode_bag
from memlane.core.store.sqlite.tokenizer import tokenize

_IN_CHUNK = 500
BACKFILL_BATCH = 5000  # keys migration 3 reads at a time
BACKFILL_MEMO_MAX = 500_000  # texts whose term bags migration 3 keeps in memory at most


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _IN_CHUNK):
        yield items[start : start + _IN_CHUNK]


def lookup_terms(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, tuple[int, int]]:
    """{term: (id, df)} for the known ones among ``terms``."""
    out: dict[str, tuple[int, int]] = {}
    for chunk in _chunks(terms):
        marks = ",".join("?" * len(chunk))
        for term_id, term, df in conn.execute(f"SELECT id, term, df FROM terms WHERE term IN ({marks})", list(chunk)):
            out[str(term)] = (int(term_id), int(df))
    return out


class TermIds:
    """One process's memo of term -> id for one store file, so a write looks up only the terms it has not
    seen yet (the lookups were a quarter of the term index's write cost).

    Ids of existing terms never change; a term's row goes only when no key holds it, and every such
    deletion bumps ``corpus.vocab_epoch`` in its transaction. Each write reads the epoch inside its own
    write transaction and forgets everything on a change, so a memo entry is never used after its term
    was deleted (or its id given to another term), whichever process deleted it. Only terms that existed
    before the writing transaction are memorised: a term it inserts is not, in case it rolls back.
    """

    MAX_TERMS = 2_000_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}
        self._epoch = -1

    def resolve(self, conn: sqlite3.Connection, vocab: Sequence[str]) -> dict[str, int]:
        """The id of every term of ``vocab``, adding the unknown ones (df 0); call inside a write."""
        return self._lookup(conn, vocab, add=True)

    def known(self, conn: sqlite3.Connection, vocab: Sequence[str]) -> dict[str, int]:
        """The ids of the terms of ``vocab`` that the store holds (no term is added); call inside a write."""
        return self._lookup(conn, vocab, add=False)

    def _lookup(self, conn: sqlite3.Connection, vocab: Sequence[str], *, add: bool) -> dict[str, int]:
        (epoch,) = conn.execute("SELECT vocab_epoch FROM corpus").fetchone()
        with self._lock:
            if epoch != self._epoch or len(self._ids) > self.MAX_TERMS:
                self._ids.clear()
                self._epoch = int(epoch)
            ids = {t: i for t in vocab if (i := self._ids.get(t)) is not None}
        missing = [t for t in vocab if t not in ids]
        if missing:
            existing = {t: v[0] for t, v in lookup_terms(conn, missing).items()}
            with self._lock:
                if self._epoch == epoch and add:  # ``known`` runs after this write added terms: not theirs
                    self._ids.update(existing)
            ids.update(existing)
            new = [t for t in missing if t not in existing]
            if not add:
                return ids
            conn.executemany("INSERT INTO terms(term, df) VALUES (?, 0)", [(t,) for t in new])
            ids.update({t: v[0] for t, v in lookup_terms(conn, new).items()})
        return ids


def _bags(
    conn: sqlite3.Connection, texts: Sequence[str], term_ids: TermIds, *, add: bool = True
) -> npt.NDArray[np.int64]:
    """(text index, term id, count) rows for ``texts``, ordered by text then term id; unknown terms are
    added to ``terms`` with df 0 (``add``), or left out."""
    bags = tokenize(conn, texts)
    vocab = sorted({t for bag in bags for t in bag})
    ids = term_ids.resolve(conn, vocab) if add else term_ids.known(conn, vocab)
    rows = [(i, ids[t], n) for i, bag in enumerate(bags) for t, n in bag.items() if t in ids]
    out = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


@dataclass
class Bags:
    """Texts as term bags: text ``j`` holds ``term_ids[i]`` ``counts[i]`` times for each ``i`` in its
    ``entries[j]`` entries (after those of the texts before it); ``lengths`` are their token counts."""

    lengths: npt.NDArray[np.int32]
    entries: npt.NDArray[np.int32]
    term_ids: npt.NDArray[np.int32]
    counts: npt.NDArray[np.uint16]


def index_texts(conn: sqlite3.Connection, texts: Sequence[str], term_ids: TermIds) -> Bags:
    """Count ``texts`` as new keys in the statistics (document frequencies, key and token totals) and return
    their term bags, adding unknown terms."""
    n = len(texts)
    bags = _as_bags(_bags(conn, texts, term_ids), n)
    held, holders = np.unique(bags.term_ids, return_counts=True)  # each (key, term) row is one key holding it
    conn.executemany("UPDATE terms SET df = df + ? WHERE id = ?", zip(holders.tolist(), held.tolist(), strict=True))
    conn.execute("UPDATE corpus SET keys = keys + ?, tokens = tokens + ?", (n, int(bags.lengths.sum())))
    return bags


def word_bags(conn: sqlite3.Connection, texts: Sequence[str], term_ids: TermIds) -> Bags:
    """The term bags of blocks' people's words, which are not keys: they change no statistics and add no
    term. Each text is part of its block's message, which is indexed first, so every term is known; one
    that is not would be left out."""
    return _as_bags(_bags(conn, texts, term_ids, add=False), len(texts))


def _as_bags(rows: npt.NDArray[np.int64], n: int) -> Bags:
    docs = rows[:, 0]
    return Bags(
        lengths=np.bincount(docs, weights=rows[:, 2], minlength=n).astype(np.int32),
        entries=np.bincount(docs, minlength=n).astype(np.int32),
        term_ids=rows[:, 1].astype(np.int32),
        counts=np.minimum(rows[:, 2], 65535).astype(np.uint16),
    )


def unindex(conn: sqlite3.Connection, keys: int, tokens: int, held: npt.NDArray[np.int32]) -> None:
    """Take deleted keys out of the statistics: ``keys`` keys of ``tokens`` tokens in all, whose bags held
    the terms ``held`` (one entry per key holding a term). Terms no key holds any more are deleted."""
    if keys == 0:
        return
    term_ids, counts = np.unique(held, return_counts=True)
    pairs = [(int(c), int(i)) for i, c in zip(term_ids.tolist(), counts.tolist(), strict=True)]
    conn.executemany("UPDATE terms SET df = df - ? WHERE id = ?", pairs)
    gone = sum(conn.execute("DELETE FROM terms WHERE id = ? AND df <= 0", (i,)).rowcount for _, i in pairs)
    if gone:
        conn.execute("UPDATE corpus SET vocab_epoch = vocab_epoch + 1")  # invalidates every TermIds memo
    conn.execute("UPDATE corpus SET keys = keys - ?, tokens = tokens - ?", (keys, tokens))


def unindex_texts(conn: sqlite3.Connection, texts: Sequence[str], term_ids: TermIds) -> None:
    """Take keys of ``texts`` out of the statistics, as :func:`index_texts` counted them (their bags
    computed again from the same texts)."""
    if not texts:
        return
    bags = _as_bags(_bags(conn, texts, term_ids, add=False), len(texts))
    unindex(conn, len(texts), int(bags.lengths.sum()), bags.term_ids)


def query_weights(conn: sqlite3.Connection, text: str) -> tuple[list[tuple[int, float]], float]:
    """The query's known terms as (term id, idf), and the corpus's average key length.

    The query's distinct words (stopwords dropped, as :func:`memlane.core.store.candidates.keyword.query_terms`
    picks them) are tokenized like the keys; a stem two words share ("run", "running") counts twice, as
    it did with FTS5, where each word was its own phrase.
    """
    words = query_terms(text)
    if not words:
        return [], 0.0
    stems = tokenize(conn, [" ".join(words)])[0]
    if not stems:
        return [], 0.0
    # The corpus size and the terms' document frequencies from one snapshot: read apart, a commit between
    # them could give a term more keys than the corpus it was counted against (a NaN idf).
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        n_keys, tokens = conn.execute("SELECT keys, tokens FROM corpus").fetchone()
        known = lookup_terms(conn, sorted(stems))
    finally:
        if own:
            conn.execute("COMMIT")
    if not known or n_keys <= 0:
        return [], 0.0
    terms = sorted(known)
    weights = idf(np.array([known[t][1] for t in terms], dtype=np.float64), int(n_keys))
    return [(known[t][0], w * stems[t]) for t, w in zip(terms, weights.tolist(), strict=True)], float(tokens) / float(
        n_keys
    )


def corpus_problems(conn: sqlite3.Connection) -> list[str]:
    """Checks the key segments and the keyword index against the keys; an empty list means consistent."""
    problems: list[str] = []
    (n_keys, tokens) = conn.execute("SELECT keys, tokens FROM corpus").fetchone()
    (search_keys,) = conn.execute("SELECT count(*) FROM search_keys").fetchone()
    (malformed,) = conn.execute(
        "SELECT count(*) FROM key_segments WHERE keys < 1 OR length(key_pks) != 8 * keys "
        "OR length(block_pks) != 8 * keys OR length(kinds) != keys OR length(event_ts) != 8 * keys "
        "OR length(lengths) != 4 * keys OR length(entries) != 4 * keys OR length(term_ids) != 2 * length(counts) "
        "OR length(vectors) % keys != 0 OR length(scales) != 4 * keys OR length(sessions) != 8 * keys "
        "OR length(words_lengths) != 4 * keys OR length(words_entries) != 4 * keys "
        "OR length(words_term_ids) != 2 * length(words_counts)"
    ).fetchone()
    if malformed:
        problems.append(f"key segments: {malformed} segments whose arrays disagree on their length")
    # Keys an update retired (dead_keys) are still in their segments until a rewrite: they count nowhere.
    dead: dict[int, npt.NDArray[np.int64]] = {}
    for user_id, key_pk in conn.execute("SELECT user_id, key_pk FROM dead_keys ORDER BY user_id, key_pk"):
        dead.setdefault(int(user_id), np.zeros(0, dtype=np.int64))
        dead[int(user_id)] = np.append(dead[int(user_id)], np.int64(key_pk))
    (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM terms").fetchone()
    counted = np.zeros(int(top) + 1, dtype=np.int64)
    indexed: list[npt.NDArray[np.int64]] = []
    retired_found = retired_tokens = 0
    (rows, total) = conn.execute("SELECT coalesce(sum(keys), 0), coalesce(sum(tokens), 0) FROM key_segments").fetchone()
    cursor = conn.execute("SELECT user_id, key_pks, term_ids, entries, lengths FROM key_segments")
    while batch := cursor.fetchmany(1_000):
        for user_id, key_pks, term_blob, entries_blob, lengths_blob in batch:
            pks = np.frombuffer(key_pks, dtype=np.int64)
            ids = np.frombuffer(term_blob, dtype=np.int32)
            if int(user_id) in dead:
                live = ~np.isin(pks, dead[int(user_id)])
                if not live.all():
                    retired_found += int((~live).sum())
                    retired_tokens += int(np.frombuffer(lengths_blob, dtype=np.int32)[~live].sum())
                    ids = ids[np.repeat(live, np.frombuffer(entries_blob, dtype=np.int32))]
                    pks = pks[live]
            indexed.append(np.stack([np.full(pks.shape[0], int(user_id), dtype=np.int64), pks], axis=1))
            if ids.size and int(ids.max()) >= counted.shape[0]:
                counted = np.concatenate([counted, np.zeros(int(ids.max()) + 1 - counted.shape[0], dtype=np.int64)])
            counted += np.bincount(ids, minlength=counted.shape[0])
    rows, total = int(rows) - retired_found, int(total) - retired_tokens
    if retired_found != sum(d.size for d in dead.values()):
        problems.append("key segments: a retired key of dead_keys is in no segment")
    if rows != search_keys:
        problems.append(f"key segments: {rows} indexed keys for {search_keys} search keys")
    if (n_keys, tokens) != (rows, total):
        problems.append(f"keyword index: corpus says {n_keys} keys / {tokens} tokens, rows hold {rows} / {total}")
    held = np.concatenate(indexed) if indexed else np.zeros((0, 2), dtype=np.int64)
    keys = np.array(conn.execute("SELECT user_id, pk FROM search_keys").fetchall(), dtype=np.int64).reshape(-1, 2)
    if not np.array_equal(np.unique(held, axis=0), np.unique(keys, axis=0)) or len(np.unique(held, axis=0)) != len(
        held
    ):
        problems.append("key segments: the indexed keys are not exactly the search keys, each once, of their user")
    stored = np.zeros_like(counted)
    for term_id, n in conn.execute("SELECT id, df FROM terms"):
        stored[int(term_id)] = int(n)
    wrong = int(np.count_nonzero(stored != counted))
    (orphans,) = conn.execute("SELECT count(*) FROM terms WHERE df <= 0").fetchone()
    wrong += int(orphans)
    if wrong:
        problems.append(f"keyword index: {wrong} terms with a wrong document frequency")
    return problems


def backfill(conn: sqlite3.Connection) -> None:
    """Index every existing search key (migration 3, inside its transaction).

    Texts are tokenized once per content hash (benchmark stores repeat sessions across users), term ids are
    assigned in memory and the document frequencies written at the end.
    """
    vocab: dict[str, int] = {}
    df = np.zeros(1024, dtype=np.int64)
    memo: dict[str, tuple[bytes, bytes, int, np.ndarray]] = {}
    n_keys = tokens = 0
    last = 0
    while True:
        batch = conn.execute(
            "SELECT s.pk, s.user_id, s.block_pk, s.kind, s.text, s.content_hash, b.event_ts "
            "FROM search_keys s JOIN blocks b ON b.pk = s.block_pk WHERE s.pk > ? ORDER BY s.pk LIMIT ?",
            (last, BACKFILL_BATCH),
        ).fetchall()
        if not batch:
            break
        last = int(batch[-1][0])
        if len(memo) + len(batch) > BACKFILL_MEMO_MAX:  # bound the memory a huge store's migration takes
            memo.clear()  # before ``fresh`` is chosen: every key of this batch must find its bag in ``memo``
        fresh = list({r[5]: r[4] for r in batch if r[5] not in memo}.items())
        for (chash, _), bag in zip(fresh, tokenize(conn, [t for _, t in fresh]), strict=True):
            by_id = {vocab.setdefault(t, len(vocab) + 1): c for t, c in bag.items()}
            id_blob, count_blob = encode_bag(by_id)
            memo[chash] = (id_blob, count_blob, sum(bag.values()), np.frombuffer(id_blob, dtype=np.int32))
        rows = []
        for pk, user_id, block_pk, kind, _, chash, ts in batch:
            id_blob, count_blob, length, ids = memo[chash]
            rows.append((user_id, pk, block_pk, kind, ts, length, id_blob, count_blob))
            if ids.size:
                if int(ids[-1]) >= df.shape[0]:
                    df = np.concatenate([df, np.zeros(max(df.shape[0], int(ids[-1]) + 1), dtype=np.int64)])
                df[ids] += 1
            tokens += length
        n_keys += len(batch)
        conn.executemany(
            "INSERT INTO key_terms(user_id, key_pk, block_pk, kind, event_ts, length, term_ids, counts) "
            "VALUES (?,?,?,?,?,?,?,?)",
            rows,
        )
    conn.executemany(
        "INSERT INTO terms(id, term, df) VALUES (?, ?, ?)",
        [(i, t, int(df[i])) for t, i in vocab.items() if df[i] > 0],
    )
    conn.execute("UPDATE corpus SET keys = ?, tokens = ?", (n_keys, tokens))
