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

import numpy as np
import numpy.typing as npt

from memlane.core.store.keyword import query_terms
from memlane.core.store.sqlite.tokenizer import tokenize
from memlane.core.store.terms import UserTerms, build_terms, encode_bag, idf
from memlane.core.store.vectors import KIND_CODES

_IN_CHUNK = 500


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
                if self._epoch == epoch:
                    self._ids.update(existing)
            ids.update(existing)
            new = [t for t in missing if t not in existing]
            conn.executemany("INSERT INTO terms(term, df) VALUES (?, 0)", [(t,) for t in new])
            ids.update({t: v[0] for t, v in lookup_terms(conn, new).items()})
        return ids


def _bags(conn: sqlite3.Connection, texts: Sequence[str], term_ids: TermIds) -> npt.NDArray[np.int64]:
    """(text index, term id, count) rows for ``texts``, ordered by text then term id; unknown terms are
    added to ``terms`` with df 0."""
    bags = tokenize(conn, texts)
    ids = term_ids.resolve(conn, sorted({t for bag in bags for t in bag}))
    rows = [(i, ids[t], n) for i, bag in enumerate(bags) for t, n in bag.items()]
    out = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def insert_key_terms(
    conn: sqlite3.Connection,
    user_id: int,
    keys: Sequence[tuple[int, int, str, str, float]],
    term_ids: TermIds,
) -> UserTerms:
    """Index keys given as (key pk, block pk, kind, text, event time); returns them as cache rows."""
    n = len(keys)
    bags = _bags(conn, [k[3] for k in keys], term_ids)
    docs, ids, counts = bags[:, 0], bags[:, 1].astype(np.int32), np.minimum(bags[:, 2], 65535).astype(np.uint16)
    offsets = np.searchsorted(docs, np.arange(n + 1)).astype(np.int64)
    lengths = np.bincount(docs, weights=bags[:, 2], minlength=n).astype(np.int64)
    held, holders = np.unique(ids, return_counts=True)  # each (key, term) row is one key holding the term
    conn.executemany("UPDATE terms SET df = df + ? WHERE id = ?", zip(holders.tolist(), held.tolist(), strict=True))
    conn.executemany(
        "INSERT INTO key_terms(user_id, key_pk, block_pk, kind, event_ts, length, term_ids, counts) "
        "VALUES (?,?,?,?,?,?,?,?)",
        [
            (user_id, key_pk, block_pk, kind, ts, int(lengths[j]), ids[a:b].tobytes(), counts[a:b].tobytes())
            for j, ((key_pk, block_pk, kind, _, ts), a, b) in enumerate(
                zip(keys, offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
            )
        ],
    )
    conn.execute("UPDATE corpus SET keys = keys + ?, tokens = tokens + ?", (n, int(lengths.sum())))
    return UserTerms(
        version=-1,
        block_pks=np.array([k[1] for k in keys], dtype=np.int64),
        kinds=np.array([KIND_CODES[k[2]] for k in keys], dtype=np.int8),
        event_ts=np.array([k[4] for k in keys], dtype=np.float64),
        lengths=lengths.astype(np.float32),
        offsets=offsets,
        term_ids=ids,
        counts=counts,
    )


def delete_key_terms(conn: sqlite3.Connection, keys: Sequence[tuple[int, int]]) -> None:
    """Unindex keys given as (user id, key pk): their rows, their share of the statistics, orphan terms."""
    found: list[tuple[int, bytes]] = []
    for user_id, key_pk in keys:
        row = conn.execute(
            "SELECT length, term_ids FROM key_terms WHERE user_id = ? AND key_pk = ?", (user_id, key_pk)
        ).fetchone()
        if row is not None:
            found.append((int(row[0]), bytes(row[1])))
    if not found:
        return
    all_ids = np.concatenate([np.frombuffer(b, dtype=np.int32) for _, b in found])
    term_ids, counts = np.unique(all_ids, return_counts=True)
    pairs = [(int(c), int(i)) for i, c in zip(term_ids.tolist(), counts.tolist(), strict=True)]
    conn.executemany("UPDATE terms SET df = df - ? WHERE id = ?", pairs)
    gone = sum(conn.execute("DELETE FROM terms WHERE id = ? AND df <= 0", (i,)).rowcount for _, i in pairs)
    if gone:
        conn.execute("UPDATE corpus SET vocab_epoch = vocab_epoch + 1")  # invalidates every TermIds memo
    conn.executemany("DELETE FROM key_terms WHERE user_id = ? AND key_pk = ?", list(keys))
    conn.execute("UPDATE corpus SET keys = keys - ?, tokens = tokens - ?", (len(found), sum(n for n, _ in found)))


def load_user_terms(conn: sqlite3.Connection, user_id: int, version: int) -> UserTerms:
    """The user's term index as stored (call inside a read transaction that also read ``version``)."""
    rows = conn.execute(
        "SELECT block_pk, kind, event_ts, length, term_ids, counts FROM key_terms WHERE user_id = ? ORDER BY key_pk",
        (user_id,),
    ).fetchall()
    return build_terms(version, rows)


def query_weights(conn: sqlite3.Connection, text: str) -> tuple[list[tuple[int, float]], float]:
    """The query's known terms as (term id, idf), and the corpus's average key length.

    The query's distinct words (stopwords dropped, as :func:`memlane.core.store.keyword.query_terms`
    picks them) are tokenized like the keys; a stem two words share ("run", "running") counts twice, as
    it did with FTS5, where each word was its own phrase.
    """
    words = query_terms(text)
    if not words:
        return [], 0.0
    stems = tokenize(conn, [" ".join(words)])[0]
    if not stems:
        return [], 0.0
    n_keys, tokens = conn.execute("SELECT keys, tokens FROM corpus").fetchone()
    known = lookup_terms(conn, sorted(stems))
    if not known or n_keys <= 0:
        return [], 0.0
    terms = sorted(known)
    weights = idf(np.array([known[t][1] for t in terms], dtype=np.float64), int(n_keys))
    return [(known[t][0], w * stems[t]) for t, w in zip(terms, weights.tolist(), strict=True)], float(tokens) / float(
        n_keys
    )


def corpus_problems(conn: sqlite3.Connection) -> list[str]:
    """Checks the keyword index against the keys; an empty list means consistent."""
    problems: list[str] = []
    (n_keys, tokens) = conn.execute("SELECT keys, tokens FROM corpus").fetchone()
    (rows, total) = conn.execute("SELECT count(*), coalesce(sum(length), 0) FROM key_terms").fetchone()
    (search_keys,) = conn.execute("SELECT count(*) FROM search_keys").fetchone()
    if rows != search_keys:
        problems.append(f"keyword index: {rows} indexed keys for {search_keys} search keys")
    if (n_keys, tokens) != (rows, total):
        problems.append(f"keyword index: corpus says {n_keys} keys / {tokens} tokens, rows hold {rows} / {total}")
    (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM terms").fetchone()
    counted = np.zeros(int(top) + 1, dtype=np.int64)
    cursor = conn.execute("SELECT term_ids FROM key_terms")
    while batch := cursor.fetchmany(10_000):
        ids = np.concatenate([np.frombuffer(b, dtype=np.int32) for (b,) in batch])
        if ids.size and int(ids.max()) >= counted.shape[0]:
            counted = np.concatenate([counted, np.zeros(int(ids.max()) + 1 - counted.shape[0], dtype=np.int64)])
        counted += np.bincount(ids, minlength=counted.shape[0])
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
            (last, 5000),
        ).fetchall()
        if not batch:
            break
        last = int(batch[-1][0])
        fresh = list({r[5]: r[4] for r in batch if r[5] not in memo}.items())
        if len(memo) + len(fresh) > 500_000:  # bound the memory a huge store's migration takes
            memo.clear()
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
