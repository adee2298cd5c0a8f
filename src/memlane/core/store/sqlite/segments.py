"""Each user's search-key vectors and term bags, stored in a few large rows ("segments") per user.

Why: a search loads a user's whole index into memory the first time (then it is cached). Read as one row
per key, that cost 2.7 microseconds a row twice over (vectors, term bags): 14.5 ms for a 2,600-key
x500 user, most of a first search's time. A segment holds many keys' columns as arrays (one blob each), so
the same user loads in a few rows: about 3.4 ms (docs/design/003-retrieval.md, "x500 latency").

Writes append one segment holding the write's keys. Segments merge by size tier (fewer than 64 keys, fewer
than 512, fewer than 4,096): when :data:`FANOUT` segments share a tier they become one segment of a higher
tier. Segments of 4,096 keys or more are never merged. A user therefore has at most 3 x (FANOUT - 1)
unmerged segments plus one per 4,096 keys, and a key is rewritten at most three times by merges. Deleting
keys rewrites the segments holding them without them (a segment left empty is deleted).

An update in place (docs/design/007-memory-model.md) retires its block's old keys instead: rewriting the
segment that holds one old key (up to 4,096 keys, a few MB, zeroed behind with ``secure_delete``) cost
three to four times an add. A retired key is listed in ``dead_keys``: it is out of the keyword statistics,
the approximate index and ``search_keys`` at once, every load leaves it out, and the next rewrite of its
segment (a merge, a deletion) drops its row for good; deleting its block drops it at once. What it held
of the old text is overwritten at once, in place (:func:`blank_keys`): its vector and its term bag become
zeros, so the old text's vector is in no page of the store once the update's checkpoint ran.

The keys of a user's segments are disjoint; their pk ranges may interleave (a merge of small segments can
span a large segment written between them), so loads sort the keys by pk when they come out of order.

Vectors are stored (and cached, :class:`memlane.core.store.candidates.vectors.UserMatrix`) as int8 with one float32
scale per key (symmetric: ``v ~ q * scale``, ``scale = max|v| / 127``), a quarter of float32's bytes. A cold
user's first search reads its whole segment, from disk when the store is larger than what the page cache
keeps, so the bytes are the latency: the vectors were 3.9 of an x500 user's 6.1 MB. A dequantized vector is
within half a step (``scale / 2``) of the embedder's in every dimension. Measured on the bench (test split,
default preset): LongMemEval-S and x500 recall identical, LoCoMo turn R_all@10 0.643 -> 0.642
(docs/design/003-retrieval.md, "x500 latency"). Schema 4 stored float32 vectors and no scales; its rows are
written by :func:`from_rows` and converted by :func:`quantize_segments` (migration 5).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from memlane.core.errors import StoreError
from memlane.core.ranking.session_words import people_words
from memlane.core.store.candidates.terms import UserTerms, encode_bag, session_code
from memlane.core.store.candidates.vectors import KIND_CODES, UserMatrix
from memlane.core.store.sqlite.terms import lookup_terms
from memlane.core.store.sqlite.tokenizer import tokenize

FANOUT = 8
MIGRATION_MEMO_MAX = 500_000  # texts whose term bags a migration keeps in memory at most
TIER_LIMITS = (64, 512, 4096)  # tier t: fewer keys than TIER_LIMITS[t] (and not fewer than TIER_LIMITS[t - 1])

# The blob columns and their dtypes, in the order of Segment's fields.
_V5_BLOBS = "key_pks, block_pks, kinds, event_ts, lengths, entries, term_ids, counts, vectors, scales"
_WORDS_BLOBS = "sessions, words_lengths, words_entries, words_term_ids, words_counts"
COLUMNS = f"keys, first_key, last_key, tokens, {_V5_BLOBS}, {_WORDS_BLOBS}"
_DTYPES = (
    np.int64, np.int64, np.int8, np.float64, np.int32, np.int32, np.int32, np.uint16, np.int8, np.float32,
    np.int64, np.int32, np.int32, np.int32, np.uint16,
)  # fmt: skip
_INSERT = f"INSERT INTO key_segments(user_id, {COLUMNS}) VALUES ({','.join('?' * 20)})"
_UPDATE = f"UPDATE key_segments SET ({COLUMNS}) = ({','.join('?' * 19)}) WHERE id = ?"
# Schema 5's row (no session codes, no words) and schema 4's (float32 vectors, no scales either).
_V5_COLUMNS = f"keys, first_key, last_key, tokens, {_V5_BLOBS}"
_V4_COLUMNS = _V5_COLUMNS.removesuffix(", scales")
# Fields with one value per (key, term) entry, by the per-key field counting each key's entries; the
# others have one value per key.
_ENTRY_FIELDS = {
    "term_ids": "entries",
    "counts": "entries",
    "words_term_ids": "words_entries",
    "words_counts": "words_entries",
}


@dataclass
class Segment:
    """Keys ``0..n-1``, each with its columns; key ``j`` holds ``term_ids[i]`` ``counts[i]`` times for each
    ``i`` in ``offsets[j]:offsets[j + 1]``, where ``offsets`` is the running sum of ``entries``."""

    key_pks: npt.NDArray[np.int64]
    block_pks: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]
    event_ts: npt.NDArray[np.float64]
    lengths: npt.NDArray[np.int32]  # tokens per key
    entries: npt.NDArray[np.int32]  # (key, term) entries per key
    term_ids: npt.NDArray[np.int32]
    counts: npt.NDArray[np.uint16]
    vectors: npt.NDArray[np.int8]  # (n, dim), quantized: see the module's docstring
    scales: npt.NDArray[np.float32]  # (n,) per key
    # The key's session (memlane.core.store.candidates.terms.session_code) and the people's words of its block as a
    # term bag like the key's own (only message keys have words: memlane.core.ranking.session_words.people_words).
    sessions: npt.NDArray[np.int64]
    words_lengths: npt.NDArray[np.int32]
    words_entries: npt.NDArray[np.int32]
    words_term_ids: npt.NDArray[np.int32]
    words_counts: npt.NDArray[np.uint16]

    @property
    def n(self) -> int:
        return int(self.key_pks.shape[0])

    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        return _offsets(self.entries)

    @property
    def words_offsets(self) -> npt.NDArray[np.int64]:
        return _offsets(self.words_entries)

    def row(self) -> tuple[object, ...]:
        """The values of :data:`COLUMNS`."""
        arrays = (getattr(self, f.name) for f in fields(self))  # in the order of _BLOBS
        first, last = (int(self.key_pks.min()), int(self.key_pks.max())) if self.n else (0, 0)
        return (self.n, first, last, int(self.lengths.sum()), *(np.ascontiguousarray(a).tobytes() for a in arrays))

    @classmethod
    def from_row(cls, row: Sequence[object]) -> Segment:
        """From the values of :data:`COLUMNS`."""
        n = int(row[0])  # type: ignore[call-overload]
        parts = [np.frombuffer(blob, dtype=dt) for blob, dt in zip(row[4:], _DTYPES, strict=True)]  # type: ignore[call-overload]
        parts[8] = parts[8].reshape(n, -1) if n else np.zeros((0, 0), dtype=np.int8)  # the vectors
        return cls(*parts)

    def take(self, keep: npt.NDArray[np.bool_]) -> Segment:
        """The keys where ``keep`` is true, in order."""
        return self._pick(keep, {c: np.repeat(keep, getattr(self, c)) for c in set(_ENTRY_FIELDS.values())})

    def _pick(self, keys: npt.NDArray[np.generic], entries: Mapping[str, npt.NDArray[np.generic]]) -> Segment:
        """The keys that ``keys`` selects (a mask or indexes) and their entries, selected by ``entries``
        (by the field counting them, as in :data:`_ENTRY_FIELDS`)."""
        return Segment(
            **{
                f.name: getattr(self, f.name)[entries[_ENTRY_FIELDS[f.name]] if f.name in _ENTRY_FIELDS else keys]
                for f in fields(self)
            }
        )

    def matrix(self, version: int) -> UserMatrix:
        return UserMatrix(
            version=version,
            vectors=self.vectors,
            scales=self.scales,
            block_pks=self.block_pks,
            kinds=self.kinds,
            event_ts=self.event_ts,
            key_pks=self.key_pks,
        )

    def terms(self, version: int) -> UserTerms:
        return UserTerms(
            version=version,
            block_pks=self.block_pks,
            kinds=self.kinds,
            event_ts=self.event_ts,
            lengths=self.lengths.astype(np.float32),
            offsets=self.offsets,
            term_ids=self.term_ids,
            counts=self.counts,
            sessions=self.sessions,
            words_lengths=self.words_lengths.astype(np.float32),
            words_offsets=self.words_offsets,
            words_term_ids=self.words_term_ids,
            words_counts=self.words_counts,
        )


def _offsets(entries: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    """Where each key's entries start (and, last, where they end): the running sum of ``entries``."""
    out = np.zeros(entries.shape[0] + 1, dtype=np.int64)
    np.cumsum(entries, out=out[1:])
    return out


def concat(segments: Sequence[Segment]) -> Segment:
    """One segment holding the keys of ``segments``, in key pk order."""
    if len(segments) == 1:
        out = segments[0]
    else:
        kept = [s for s in segments if s.n] or [empty_segment()]  # an empty one's vectors have no width
        out = Segment(**{f.name: np.concatenate([getattr(s, f.name) for s in kept]) for f in fields(Segment)})
    if out.n > 1 and bool(np.any(np.diff(out.key_pks) <= 0)):
        out = _sorted(out)
    return out


def _sorted(seg: Segment) -> Segment:
    order = np.argsort(seg.key_pks, kind="stable")
    picks = {}
    for counter in set(_ENTRY_FIELDS.values()):
        per_key: npt.NDArray[np.int32] = getattr(seg, counter)
        lens = per_key[order].astype(np.int64)
        starts = _offsets(per_key)[:-1][order]  # where each key's entries are, in the new key order
        picks[counter] = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
    return seg._pick(order, picks)


def tier(keys: int) -> int:
    """The size tier of a segment of ``keys`` keys; ``len(TIER_LIMITS)`` means never merged."""
    for t, limit in enumerate(TIER_LIMITS):
        if keys < limit:
            return t
    return len(TIER_LIMITS)


def insert_segment(conn: sqlite3.Connection, user_id: int, segment: Segment) -> None:
    """Store ``segment`` for the user (nothing when it is empty), then merge the user's segments."""
    if segment.n == 0:
        return
    conn.execute(_INSERT, (user_id, *segment.row()))
    merge(conn, user_id)


def dead_keys(conn: sqlite3.Connection, user_id: int) -> npt.NDArray[np.int64]:
    """The user's retired keys (ascending): usually none."""
    rows = conn.execute("SELECT key_pk FROM dead_keys WHERE user_id = ?", (user_id,)).fetchall()
    return np.array(sorted(int(r[0]) for r in rows), dtype=np.int64)


def _forget_dead(conn: sqlite3.Connection, user_id: int, key_pks: npt.NDArray[np.int64]) -> None:
    """The retired keys ``key_pks`` have left the segments: their rows in ``dead_keys`` go too."""
    conn.executemany(
        "DELETE FROM dead_keys WHERE user_id = ? AND key_pk = ?", [(user_id, int(k)) for k in key_pks.tolist()]
    )


def merge(conn: sqlite3.Connection, user_id: int) -> None:
    """Merge the user's segments of each tier that holds :data:`FANOUT` of them, lowest tier first."""
    while True:
        sizes = conn.execute("SELECT id, keys FROM key_segments WHERE user_id = ?", (user_id,)).fetchall()
        by_tier: dict[int, list[int]] = {}
        for seg_id, keys in sizes:
            by_tier.setdefault(tier(int(keys)), []).append(int(seg_id))
        full = [ids for t, ids in sorted(by_tier.items()) if t < len(TIER_LIMITS) and len(ids) >= FANOUT]
        if not full:
            return
        ids = full[0]
        marks = ",".join("?" * len(ids))
        rows = conn.execute(f"SELECT {COLUMNS} FROM key_segments WHERE id IN ({marks})", ids).fetchall()
        merged = concat([Segment.from_row(r) for r in rows])
        dead = dead_keys(conn, user_id)
        if dead.size:  # the merge rewrites these keys anyway: the retired ones are left out for good
            retired = np.isin(merged.key_pks, dead)
            if retired.any():
                _forget_dead(conn, user_id, merged.key_pks[retired])
                merged = merged.take(~retired)
        conn.execute(f"DELETE FROM key_segments WHERE id IN ({marks})", ids)
        if merged.n:
            conn.execute(_INSERT, (user_id, *merged.row()))


def blank_keys(conn: sqlite3.Connection, user_id: int, key_pks: Sequence[int]) -> None:
    """Overwrite with zeros, in place, the int8 vectors and the term bags of the given keys in the user's
    segments (keys being retired: nothing reads them again). Only those bytes are written (SQLite's
    incremental blob I/O), not the segment. The columns after the vectors (the scale, the people's words)
    are left as they are: a blob write walks the row's overflow pages up to its offset, and past the
    vectors that is most of the row (a zero vector is zero at any scale)."""
    for pk in key_pks:
        rows = conn.execute(
            "SELECT id, key_pks, entries FROM key_segments WHERE user_id = ? AND first_key <= ? AND last_key >= ?",
            (user_id, pk, pk),
        ).fetchall()
        for seg_id, pks_blob, entries_blob in rows:
            at = np.flatnonzero(np.frombuffer(pks_blob, dtype=np.int64) == pk)
            if at.size == 0:
                continue  # ranges may interleave: another segment holds it
            j = int(at[0])
            offsets = _offsets(np.frombuffer(entries_blob, dtype=np.int32))
            first, count = int(offsets[j]), int(offsets[j + 1] - offsets[j])
            with conn.blobopen("key_segments", "vectors", seg_id) as blob:
                dim = len(blob) // (len(pks_blob) // 8)
                blob.seek(dim * j)
                blob.write(bytes(dim))
            for column, (start, size) in {"term_ids": (4 * first, 4 * count), "counts": (2 * first, 2 * count)}.items():
                if size:
                    with conn.blobopen("key_segments", column, seg_id) as blob:
                        blob.seek(start)
                        blob.write(bytes(size))


def load_user(conn: sqlite3.Connection, user_id: int) -> Segment:
    """All the user's keys as one segment, in key pk order (call inside a read transaction)."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM key_segments WHERE user_id = ? ORDER BY first_key", (user_id,)
    ).fetchall()
    if not rows:
        return empty_segment()
    seg = concat([Segment.from_row(r) for r in rows])
    dead = dead_keys(conn, user_id)
    return seg.take(~np.isin(seg.key_pks, dead)) if dead.size else seg


def remove_keys(conn: sqlite3.Connection, user_id: int, key_pks: Sequence[int]) -> Segment:
    """Take the given keys out of the user's segments, then merge as after a write; returns what they held
    (keys not found are skipped)."""
    wanted = np.array(sorted(set(key_pks)), dtype=np.int64)
    if wanted.size == 0:
        return empty_segment()
    rows = conn.execute(
        f"SELECT id, {COLUMNS} FROM key_segments WHERE user_id = ? AND last_key >= ? AND first_key <= ?",
        (user_id, int(wanted[0]), int(wanted[-1])),
    ).fetchall()
    removed: list[Segment] = []
    dead = dead_keys(conn, user_id)
    for seg_id, *values in rows:
        seg = Segment.from_row(values)
        drop = np.isin(seg.key_pks, wanted)
        if not drop.any():
            continue
        removed.append(seg.take(drop))
        retired = np.isin(seg.key_pks, dead) if dead.size else np.zeros(seg.n, dtype=np.bool_)
        if retired.any():  # rewritten anyway: the retired keys go for good
            _forget_dead(conn, user_id, seg.key_pks[retired])
        keep = ~drop & ~retired
        if not keep.any():
            conn.execute("DELETE FROM key_segments WHERE id = ?", (seg_id,))
        else:
            rest = seg.take(keep)
            conn.execute(_UPDATE, (*rest.row(), seg_id))
    if removed:
        merge(conn, user_id)  # a shrunk segment may have filled a lower tier
    return concat(removed) if removed else empty_segment()


def empty_segment() -> Segment:
    shapes = {f.name: (0, 0) if f.name == "vectors" else 0 for f in fields(Segment)}  # no key, no width yet
    return Segment(
        **{name: np.zeros(shape, dtype=dt) for (name, shape), dt in zip(shapes.items(), _DTYPES, strict=True)}
    )


def quantize(vectors: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Each row as int8 and its scale: ``row ~ q * scale`` with ``scale = max|row| / 127`` (1 for a zero row)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.shape[0] == 0:
        return np.zeros(v.shape, dtype=np.int8), np.zeros(0, dtype=np.float32)
    peak = np.abs(v).max(axis=1)
    scales = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
    return np.clip(np.rint(v / scales[:, None]), -127, 127).astype(np.int8), scales


def from_rows(conn: sqlite3.Connection) -> None:
    """Migration 4's step: move every user's keys from the per-key tables ``key_vectors`` and ``key_terms``
    into schema 4's segments (float32 vectors) of at most ``TIER_LIMITS[-1]`` keys, inside the migration's
    transaction; migration 5 quantizes them."""
    chunk = TIER_LIMITS[-1]
    moved = 0
    insert = f"INSERT INTO key_segments(user_id, {_V4_COLUMNS}) VALUES ({','.join('?' * 14)})"
    for (user_id,) in conn.execute("SELECT id FROM users ORDER BY id").fetchall():
        rows = conn.execute(
            "SELECT v.key_pk, v.block_pk, v.kind, v.event_ts, t.length, t.term_ids, t.counts, v.embedding "
            "FROM key_vectors v LEFT JOIN key_terms t ON t.user_id = v.user_id AND t.key_pk = v.key_pk "
            "WHERE v.user_id = ? ORDER BY v.key_pk",
            (user_id,),
        ).fetchall()
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            if any(r[4] is None for r in part):
                raise StoreError(f"cannot migrate: user {user_id} has key vectors without term rows")
            pks, blocks, kinds, ts, lengths, ids, counts, vectors = zip(*part, strict=True)
            arrays = (
                np.array(pks, dtype=np.int64),
                np.array(blocks, dtype=np.int64),
                np.array([KIND_CODES[k] for k in kinds], dtype=np.int8),
                np.array(ts, dtype=np.float64),
                np.array(lengths, dtype=np.int32),
                np.array([len(b) // 4 for b in ids], dtype=np.int32),
            )
            head = (len(part), int(min(pks)), int(max(pks)), int(sum(lengths)))
            blobs = (*(a.tobytes() for a in arrays), b"".join(ids), b"".join(counts), b"".join(vectors))
            conn.execute(insert, (user_id, *head, *blobs))
        moved += len(rows)
    (expected,) = conn.execute("SELECT keys FROM corpus").fetchone()
    if moved != expected:
        raise StoreError(f"cannot migrate: moved {moved} keys of users, but the keyword index counts {expected}")


def quantize_segments(conn: sqlite3.Connection) -> None:
    """Migration 5's step: rewrite every schema-4 segment (table ``key_segments_v4``) with int8 vectors and
    per-key scales into ``key_segments``, keeping its id (inside the migration's transaction)."""
    cursor = conn.execute(f"SELECT id, user_id, {_V4_COLUMNS} FROM key_segments_v4 ORDER BY id")
    insert = f"INSERT INTO key_segments(id, user_id, {_V5_COLUMNS}) VALUES ({','.join('?' * 16)})"
    while batch := cursor.fetchmany(8):  # a segment can hold 6 MB of float32
        for seg_id, user_id, n, *unchanged, vectors in batch:  # every column but the vectors is copied as is
            q, scales = quantize(np.frombuffer(vectors, dtype=np.float32).reshape(int(n), -1))
            conn.execute(insert, (seg_id, user_id, n, *unchanged, q.tobytes(), scales.tobytes()))


def add_words(conn: sqlite3.Connection) -> None:
    """Migration 6's step: give every segment its keys' session codes and the people's words of its
    message keys' blocks, read from the stored messages (inside the migration's transaction).

    Words are tokenized once per distinct text (benchmark stores repeat sessions across users) and their
    terms looked up in the term table, which holds them all: each text is part of an indexed message.
    """
    bags: dict[str, tuple[bytes, bytes, int]] = {}
    term_ids: dict[str, int] = {}
    message = KIND_CODES["message"]
    segment_ids = [int(r[0]) for r in conn.execute("SELECT id FROM key_segments ORDER BY id")]
    for seg_id in segment_ids:
        block_blob, kind_blob = conn.execute(
            "SELECT block_pks, kinds FROM key_segments WHERE id = ?", (seg_id,)
        ).fetchone()
        block_pks = np.frombuffer(block_blob, dtype=np.int64).tolist()
        kinds = np.frombuffer(kind_blob, dtype=np.int8).tolist()
        blocks: dict[int, tuple[str, str]] = {}
        unique = sorted(set(block_pks))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT pk, session_id, message, mode, perspective FROM blocks WHERE pk IN ({marks})", chunk
            ).fetchall()
            blocks.update({int(pk): (str(s), people_words(m, md, p)) for pk, s, m, md, p in rows})
        if len(blocks) != len(unique):
            raise StoreError(f"cannot migrate: segment {seg_id} holds keys of blocks that do not exist")
        texts = [blocks[pk][1] if kind == message else "" for pk, kind in zip(block_pks, kinds, strict=True)]
        if len(bags) + len(texts) > MIGRATION_MEMO_MAX:  # bound the memory a huge store's migration takes
            bags.clear()  # before ``fresh`` is chosen: every text of this segment must end up in ``bags``
        fresh = sorted({t for t in texts if t not in bags})
        counted = tokenize(conn, fresh)
        unknown = sorted({w for bag in counted for w in bag if w not in term_ids})
        term_ids.update({w: v[0] for w, v in lookup_terms(conn, unknown).items()})
        for text, bag in zip(fresh, counted, strict=True):
            by_id = {term_ids[w]: c for w, c in bag.items() if w in term_ids}
            bags[text] = (*encode_bag(by_id), sum(by_id.values()))
        words = [bags[t] for t in texts]
        conn.execute(
            "UPDATE key_segments SET sessions = ?, words_lengths = ?, words_entries = ?, words_term_ids = ?, "
            "words_counts = ? WHERE id = ?",
            (
                np.array([session_code(blocks[pk][0]) for pk in block_pks], dtype=np.int64).tobytes(),
                np.array([w[2] for w in words], dtype=np.int32).tobytes(),
                np.array([len(w[0]) // 4 for w in words], dtype=np.int32).tobytes(),
                b"".join(w[0] for w in words),
                b"".join(w[1] for w in words),
                seg_id,
            ),
        )
