"""Approximate vector search for large users of the SQLite store: one HNSW index (hnswlib) per user, kept
as derived data in files beside the database (``<db>.ann/u<user id>-<token>.hnsw``).

The store's per-user matrix (:class:`memlane.core.store.candidates.vectors.UserMatrix`, read in one snapshot at the
user's version) stays the truth. The index only proposes keys, by pk; a search then

* keeps the proposed keys the matrix still holds (a key deleted since the index was saved is never
  returned, whichever process deleted it),
* adds every key newer than the index's *watermark* (the highest key pk it was built from: key pks only
  grow, never reused, :func:`memlane.core.store.sqlite.keys.next_key_pks`), so a committed key is never
  missed: the keys added since the index was saved are scanned exactly (the "tail"),
* and scores them all exactly from the matrix, as the exact scan does.

The graph holds one node per distinct stored vector (:mod:`memlane.core.store.sqlite.annnodes`): keys that
repeat a vector share the node of its first key, and a map saved beside the index (``.keys``) expands a
node found into all its keys before the matrix keeps the live ones.

So an index file may be missing, stale or from before a crash: the answer stays right, and the index is
rebuilt or extended in the background (``AnnSettings.build``), or by :meth:`AnnIndexes.build_now`
(``memlane index build``) in a process that would not live to finish a build. Where the index stands is a
row of ``ann_index`` (file, generation, watermark, keys indexed, keys deleted since), written only by a
compare-and-set on the generation, after the file is complete on disk (written to a temporary name,
fsynced, renamed). Every key deletion calls
:func:`forget_keys` in its transaction (it counts the deleted indexed keys: past a fifth of the index it
is rebuilt, and journals them, so that their vectors are overwritten in the files before the deletion
returns: :mod:`memlane.core.store.sqlite.annscrub`); a user's deletion calls :func:`drop_user`, which
removes the row and the files.

A build runs hnswlib's native threads. A process must not end while one runs: a thread still inside
hnswlib when the interpreter shuts down is torn down under it and the process aborts (``terminate called
without an active exception``, exit 134). So builds stop between batches of :data:`BATCH` keys once
:meth:`AnnIndexes.close` is called (by the store's ``close``, and for every live store at interpreter
exit), and ``close`` waits for them; a stopped build saves nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import sqlite3
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memlane.core.errors import StoreError
from memlane.core.store.candidates.annbuilds import UserBuilds
from memlane.core.store.candidates.annsettings import AnnSettings, IndexStatus
from memlane.core.store.candidates.vectors import EVERY_KEY, KeyRules, UserMatrix, top_blocks_of_rows
from memlane.core.store.sqlite import annscrub
from memlane.core.store.sqlite.annnodes import KeyMap, first_copies, load_map, map_path, save_map
from memlane.core.store.sqlite.annscrub import live_keys

if TYPE_CHECKING:
    import hnswlib

log = logging.getLogger(__name__)

TAIL_MAX = 4096  # keys past the watermark scanned exactly before the index is extended
REBUILD_DELETED = 0.2  # rebuild once this share of the indexed keys is deleted
BATCH = 1024  # keys added to a graph at a time: a build stops between batches when the store closes
_ROW = "SELECT file, generation, max_key_pk, keys, deleted FROM ann_index WHERE user_id = ?"


@dataclass
class IndexRow:
    """Where a user's index stands (a row of ``ann_index``)."""

    file: str
    generation: int
    max_key_pk: int
    keys: int
    deleted: int


@dataclass
class Loaded:
    """An index in memory, as of a row of ``ann_index`` (``max_key_pk`` and ``keys`` are the row's, so
    keys added to the graph later are still treated as tail until their row is written)."""

    index: hnswlib.Index
    row: IndexRow
    lock: threading.RLock
    keys: KeyMap | None = None  # the keys each node stands for (None: each node is the key it is labelled by)


def folder(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".ann")


def read_row(conn: sqlite3.Connection, user_id: int) -> IndexRow | None:
    row = conn.execute(_ROW, (user_id,)).fetchone()
    return None if row is None else IndexRow(str(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]))


def db_file(conn: sqlite3.Connection) -> Path:
    """The database file of ``conn`` (its main schema)."""
    return Path(next(str(r[2]) for r in conn.execute("PRAGMA database_list") if r[1] == "main"))


def forget_keys(conn: sqlite3.Connection, user_id: int, key_pks: npt.NDArray[np.int64] | list[int]) -> None:
    """Called by every deletion of a user's keys, inside its transaction: counts the deleted keys the
    user's index holds, so it is rebuilt once enough of it is dead (searches need nothing: they drop the
    keys their matrix no longer holds), and journals them, so that the store overwrites their vectors in
    the user's index files once the transaction commits (:func:`memlane.core.store.sqlite.annscrub.journal`)."""
    pks = np.asarray(key_pks, dtype=np.int64)
    annscrub.journal(conn, folder(db_file(conn)), user_id, pks)
    row = read_row(conn, user_id)
    if row is None:
        return
    n = int(np.count_nonzero(pks <= row.max_key_pk))
    if n:
        conn.execute("UPDATE ann_index SET deleted = deleted + ? WHERE user_id = ?", (n, user_id))


def drop_user(conn: sqlite3.Connection, db_path: Path, user_id: int) -> None:
    """Called by a user's deletion, inside its transaction: removes the row and every index file of the
    user. Files go first: if the transaction then fails, the user merely has no index (rebuilt later);
    a builder that finishes after the deletion finds no user and deletes its own file."""
    conn.execute("DELETE FROM ann_index WHERE user_id = ?", (user_id,))
    conn.execute("DELETE FROM meta WHERE key = ?", (f"{annscrub.JOURNAL}{user_id}",))  # no file left to scrub
    base = folder(db_path)
    if base.is_dir():
        for path in base.glob(f"u{user_id}-*"):
            path.unlink(missing_ok=True)


def status(conn: sqlite3.Connection, db_path: Path, settings: AnnSettings, user_id: int, user: str) -> IndexStatus:
    """Where the user's index stands, from its row, its file and the user's keys (``memlane index status``)."""
    got = conn.execute("SELECT count(*) FROM search_keys WHERE user_id = ?", (user_id,)).fetchone()
    keys = int(got[0]) if got else 0
    row = read_row(conn, user_id)
    if row is None or not (folder(db_path) / row.file).is_file():
        return IndexStatus(user, keys, settings.applies(keys), "none")
    got = conn.execute(
        "SELECT count(*) FROM search_keys WHERE user_id = ? AND pk > ?", (user_id, row.max_key_pk)
    ).fetchone()
    tail = int(got[0]) if got else 0
    stale = row.deleted > REBUILD_DELETED * max(row.keys, 1) or tail > TAIL_MAX
    return IndexStatus(user, keys, settings.applies(keys), "stale" if stale else "ready", row.keys, tail, row.deleted)


class Cancelled(StoreError):
    """A build stopped because its store was closed (or the interpreter is ending)."""

    def __init__(self) -> None:
        super().__init__("the store was closed: the index build stopped, nothing was saved")


class AnnIndexes(UserBuilds):
    """The indexes of one store in this process: loaded lazily, built, extended and rebuilt by one worker
    thread per user (or inline, ``settings.background=False``; or never by a search, ``settings.build=False``,
    which loads a saved index inline and leaves building to :meth:`build_now`)."""

    def __init__(
        self,
        db_path: Path,
        settings: AnnSettings,
        connect: Callable[[], sqlite3.Connection],
    ) -> None:
        super().__init__(settings)
        self.db_path = db_path
        self._connect = connect  # this thread's connection of the store
        self._loaded: dict[int, Loaded] = {}
        _LIVE.add(self)

    def close(self) -> None:
        """Stop the builds running in this process (each stops before its next batch and saves nothing)
        and wait for them; searches after this start none."""
        self._stop.set()
        with self._lock:
            running = [t for t in self._threads.values() if t is not threading.current_thread()]
        for thread in running:
            thread.join()

    def _check(self) -> None:
        if self._stop.is_set():
            raise Cancelled

    # -- search ------------------------------------------------------------------------------------------

    def top_blocks(
        self,
        user_id: int,
        matrix: UserMatrix,
        query: npt.NDArray[np.float32],
        k: int,
        rules: KeyRules = EVERY_KEY,
    ) -> list[tuple[int, float]] | None:
        """The top-k blocks among the keys ``rules`` keep, through the user's index, or None when there is no
        usable index yet (the caller then scans exactly; the index is being prepared) or the rules keep too
        few of its proposals (the exact scan of what they keep is then cheaper and exact)."""
        loaded = self._current(user_id, matrix)
        if loaded is None or k <= 0:
            return None
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        split = int(np.searchsorted(matrix.key_pks, loaded.row.max_key_pk, side="right"))
        tail = np.arange(split, matrix.n, dtype=np.int64)
        indexed = matrix.key_pks[:split]
        keys = loaded.keys
        first = want = max(4 * k + 32, k)
        while True:
            with loaded.lock:
                nodes = int(loaded.index.get_current_count())
                n = max(1, min(want, nodes))
                # Asked again (a filter kept too few): the answer now lies deeper in the list, where a beam
                # as wide as the list misses more; twice as wide keeps it (filtered recall on distinct
                # real vectors, docs/scaling.md).
                loaded.index.set_ef(max(self.settings.ef_search, n if want == first else 2 * n))
                try:
                    labels, _ = loaded.index.knn_query(q, k=n)
                except RuntimeError:
                    # hnswlib could not reach n elements from its entry point (an empty graph, or one
                    # that became hard to walk): the exact scan answers instead, never an error.
                    return None
            found = labels.reshape(-1).astype(np.int64)  # nearest first
            # Each node found stands for every key that carries its vector; the matrix keeps the live ones.
            # Of the nodes found, the nearest that hold ``want`` keys together are enough (a vector repeated
            # a thousand times must not cost a thousand-fold scoring); the rest only count once too few pass.
            whole = True
            pks = found
            if keys is not None:
                pks, whole = keys.expand_nearest(found, want)
            rows = np.searchsorted(indexed, pks)
            ok = rows < indexed.shape[0]
            ok[ok] = indexed[rows[ok]] == pks[ok]
            cand = np.concatenate([np.unique(rows[ok]), tail])
            out = top_blocks_of_rows(matrix, cand, q, k, rules)
            # Fewer than k blocks: the filters or deletions removed too many proposals. Ask for more nodes;
            # once the index has been asked for every node it holds, its answer is complete.
            if len(out) >= k or (n >= nodes and whole):
                return out
            if want >= 16 * (4 * k + 32):
                return None  # a narrow filter: the exact scan is cheaper than widening further
            want *= 4

    # -- keeping the index current ------------------------------------------------------------------------

    def _current(self, user_id: int, matrix: UserMatrix) -> Loaded | None:
        """The loaded index, if any (any index gives right answers: see the module's docstring); starts
        the work that brings it up to date when there is none, it is behind the row, or it is stale."""
        row = read_row(self._connect(), user_id)
        loaded = self._loaded.get(user_id)
        if loaded is not None and row is None:
            self._loaded.pop(user_id, None)  # dropped (the user was deleted): never reuse it
            loaded = None
        behind = loaded is None or (row is not None and row.generation != loaded.row.generation)
        if not self.settings.build:
            # Use the saved index as it is (a stale one still answers right); build nothing.
            if behind and row is not None:
                fresh = self._load(row, int(matrix.vectors.shape[1]))
                if fresh is not None:
                    self._loaded[user_id] = fresh
            return self._loaded.get(user_id)
        if behind or (row is not None and _stale(row, matrix)):
            self._start(user_id, lambda: self._bring_up(user_id, matrix, row))
        return self._loaded.get(user_id)

    def _stopped(self, exc: Exception) -> bool:
        """A build here checks for the close between its batches and stops with :class:`Cancelled`."""
        return isinstance(exc, Cancelled)

    def build_now(self, user_id: int, matrix: UserMatrix) -> None:
        """Bring the user's index fully up to date in this thread, whatever the threshold: build it if there
        is none (or too much of it is deleted), else add every key past its watermark (``memlane index
        build``), after any build of the user this process runs in the background. Cancelled (nothing
        saved) if the store is closed meanwhile."""
        while True:
            with self._lock:
                running = self._threads.get(user_id)
                if running is None and user_id not in self._busy:
                    self._busy.add(user_id)
                    break
            self._check()
            if running is not None:
                running.join()
            else:
                self._stop.wait(0.05)  # an inline build of another thread
        try:
            self._bring_up(user_id, matrix, read_row(self._connect(), user_id), tail_max=0)
        finally:
            with self._lock:
                self._busy.discard(user_id)

    def _bring_up(self, user_id: int, matrix: UserMatrix, row: IndexRow | None, *, tail_max: int = TAIL_MAX) -> None:
        loaded = self._loaded.get(user_id)
        if row is not None and (loaded is None or loaded.row.generation != row.generation):
            loaded = self._load(row, int(matrix.vectors.shape[1]))
            if loaded is not None:
                self._loaded[user_id] = loaded
        copies: npt.NDArray[np.int64] | None = None
        if row is not None and loaded is not None and loaded.keys is None:
            # An index without a map whose keys repeat a vector was saved before nodes were shared: each
            # copy is a node of its own, a graph a walk does not get out of. It is rebuilt.
            copies = first_copies(matrix)
            split = int(np.searchsorted(matrix.key_pks, row.max_key_pk, side="right"))
            if bool((copies[:split] != np.arange(split)).any()):
                loaded = None
        if row is None or loaded is None or row.deleted > REBUILD_DELETED * max(row.keys, 1):
            index, keys = self._build(matrix, first_copies(matrix) if copies is None else copies)
            self._save(user_id, row, index, keys, int(matrix.key_pks[-1]), matrix.n, rebuilt=True)
            return
        split = int(np.searchsorted(matrix.key_pks, row.max_key_pk, side="right"))
        if matrix.n - split > tail_max:
            keys = self._extend(loaded, matrix, split, first_copies(matrix) if copies is None else copies)
            count = row.keys + matrix.n - split
            self._save(user_id, row, loaded.index, keys, int(matrix.key_pks[-1]), count, rebuilt=False)

    def _build(self, matrix: UserMatrix, rep: npt.NDArray[np.int64]) -> tuple[hnswlib.Index, KeyMap | None]:
        """A graph of the matrix's distinct vectors (:mod:`memlane.core.store.sqlite.annnodes`; ``rep``:
        each row's first copy), each node labelled by the first key carrying its vector, and the map of the
        keys each node stands for (None when every vector is distinct)."""
        import hnswlib

        s = self.settings
        distinct = np.flatnonzero(rep == np.arange(matrix.n, dtype=np.int64))
        index = hnswlib.Index(space="ip", dim=int(matrix.vectors.shape[1]))
        index.init_index(
            max_elements=_capacity(int(distinct.size)), M=s.m, ef_construction=s.ef_construction, random_seed=7
        )
        for start in range(0, distinct.size, BATCH):
            self._check()
            rows = distinct[start : start + BATCH]
            index.add_items(_dequantized(matrix, rows), matrix.key_pks[rows], num_threads=-1)
        keys = None if distinct.size == matrix.n else KeyMap.of(matrix.key_pks[rep], matrix.key_pks)
        return index, keys

    def _extend(self, loaded: Loaded, matrix: UserMatrix, split: int, rep: npt.NDArray[np.int64]) -> KeyMap | None:
        """Add the keys past the watermark to the loaded graph (searches go on meanwhile) and return the
        map of the extended index: a key whose vector an indexed key of the matrix already carries joins
        that key's node; the others get one new node per distinct vector (``rep``: each row's first copy)."""
        index, pks = loaded.index, matrix.key_pks
        indexed_labels = pks[:split] if loaded.keys is None else loaded.keys.label_of(pks[:split])
        tail = np.arange(split, matrix.n, dtype=np.int64)
        first = rep[tail]
        labels = np.full(tail.size, -1, dtype=np.int64)
        inside = first < split
        labels[inside] = indexed_labels[first[inside]]
        new = labels < 0
        # The tail's own vectors: one node per distinct vector, labelled by its first key in the tail.
        _, at, inverse = np.unique(first[new], return_index=True, return_inverse=True)
        node_rows = tail[new][at]
        labels[new] = pks[node_rows][inverse.reshape(-1)]
        with loaded.lock:
            if index.get_max_elements() < index.get_current_count() + node_rows.size:
                index.resize_index(_capacity(index.get_current_count() + int(node_rows.size)))
            old = loaded.keys
            if old is None:  # the graph's labels are its keys (up to the watermark of its row)
                held = np.sort(np.asarray(index.get_ids_list(), dtype=np.int64))
                held = held[held <= loaded.row.max_key_pk]
                old = KeyMap(held, held)
        for start in range(0, node_rows.size, BATCH):
            self._check()
            rows = node_rows[start : start + BATCH]
            vectors = _dequantized(matrix, rows)
            with loaded.lock:
                index.add_items(vectors, pks[rows], num_threads=-1)
        if loaded.keys is None and bool((labels == pks[tail]).all()):
            return None  # still one key per node
        return KeyMap.of(np.concatenate([old.labels, labels]), np.concatenate([old.pks, pks[tail]]))

    def _load(self, row: IndexRow, dim: int) -> Loaded | None:
        """The row's file, or None if it is missing or does not hold what the row says (it is rebuilt)."""
        import hnswlib

        path = folder(self.db_path) / row.file
        if not path.is_file():
            return None
        index = hnswlib.Index(space="ip", dim=dim)
        try:
            index.load_index(str(path), max_elements=0)
        except (RuntimeError, ValueError, MemoryError) as exc:
            log.warning("approximate index %s unreadable (%s): rebuilding it", path, exc)
            return None
        keys = None
        if map_path(path).is_file():  # no map: every node is its own key (as in indexes saved before maps)
            keys = load_map(map_path(path))
            if keys is None:
                log.warning("approximate index map %s unreadable: rebuilding the index", map_path(path))
                return None
        if (index.get_current_count() if keys is None else keys.size) < row.keys:
            return None
        return Loaded(index=index, row=row, lock=threading.RLock(), keys=keys)

    def _save(
        self,
        user_id: int,
        prev: IndexRow | None,
        index: hnswlib.Index,
        key_map: KeyMap | None,
        max_key_pk: int,
        keys: int,
        *,
        rebuilt: bool,
    ) -> None:
        """Write the index to a new file (and its map of keys per node beside it, when a node stands for
        several keys), then record it if the row is still ``prev`` (else another process got there first:
        drop ours and use theirs). A rebuilt index holds none of the keys deleted before it was built; an
        extended one still holds them all (they are counted, not removed)."""
        self._check()  # an extended graph that is not saved is dropped with the process: nothing is lost
        base = folder(self.db_path)
        base.mkdir(exist_ok=True)
        name = f"u{user_id}-{secrets.token_hex(6)}.hnsw"
        if key_map is not None:  # first: an index file is never without the map it needs
            tmp_map = base / (map_path(Path(name)).name + ".tmp")
            save_map(key_map, tmp_map)
            os.replace(tmp_map, map_path(base / name))
        tmp = base / (name + ".tmp")
        conn = self._connect()
        try:
            with annscrub.writing(tmp):
                index.save_index(str(tmp))
                annscrub.save_labels(tmp, annscrub.labels_path(base / name))
                labels = np.fromfile(annscrub.labels_path(base / name), dtype="<i8").astype(np.int64)
                # The graph holds the keys it was built from (and, extended, every key deleted since it was
                # loaded): the vectors of those deleted by now leave the file before anyone can read it.
                live, indexed = self._live(conn, user_id, max_key_pk)
                annscrub.scrub(tmp, annscrub.dead_labels(labels, key_map, live))
                with open(tmp, "rb") as fh:
                    os.fsync(fh.fileno())
                os.replace(tmp, base / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            _unlink(base / name)
            raise
        generation = (prev.generation if prev else 0) + 1
        deleted = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = read_row(conn, user_id)
            exists = conn.execute("SELECT 1 FROM users WHERE id = ?", (user_id,)).fetchone() is not None
            same = (now is None and prev is None) or (
                now is not None and prev is not None and now.generation == prev.generation
            )
            if exists and same and self._live(conn, user_id, max_key_pk, count_only=True)[1] != indexed:
                # Keys it holds were deleted since: their deletions may have looked for the user's files
                # before this one was in place. Deletions wait for this transaction, so none is missed.
                annscrub.scrub(base / name, annscrub.dead_labels(labels, key_map, live_keys(conn, user_id)))
            if exists and same:
                deleted = 0 if now is None else now.deleted - (prev.deleted if prev and rebuilt else 0)
                conn.execute(
                    "INSERT INTO ann_index(user_id, file, generation, max_key_pk, keys, deleted) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(user_id) DO UPDATE SET file = excluded.file, "
                    "generation = excluded.generation, max_key_pk = excluded.max_key_pk, keys = excluded.keys, "
                    "deleted = excluded.deleted",
                    (user_id, name, generation, max_key_pk, keys, max(deleted, 0)),
                )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            _unlink(base / name)
            raise
        if not (exists and same):
            _unlink(base / name)
            return
        if prev is not None and prev.file != name:
            _unlink(base / prev.file)
        row = IndexRow(name, generation, max_key_pk, keys, max(deleted, 0))
        old = self._loaded.get(user_id)
        lock = old.lock if old else threading.RLock()
        self._loaded[user_id] = Loaded(index=index, row=row, lock=lock, keys=key_map)

    @staticmethod
    def _live(
        conn: sqlite3.Connection, user_id: int, max_key_pk: int, *, count_only: bool = False
    ) -> tuple[npt.NDArray[np.int64], int]:
        """The user's live keys (none with ``count_only``) and how many of them are at most ``max_key_pk``
        (a number only deletions lower: later keys have higher pks), read in one snapshot."""
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            live = np.zeros(0, dtype=np.int64) if count_only else live_keys(conn, user_id)
            (n,) = conn.execute(
                "SELECT count(*) FROM search_keys WHERE user_id = ? AND pk <= ?", (user_id, max_key_pk)
            ).fetchone()
        finally:
            if own:
                conn.execute("COMMIT")
        return live, int(n)

    def scrub_journal(self, *, sync: bool = True) -> int:
        """Overwrite the journalled deleted keys' vectors in the index files (after the deleting
        transaction committed, or when the store is opened after a process died before it could); how
        many users' journals there were. ``sync``: fsync the files."""
        return annscrub.scrub_journal(self._connect(), folder(self.db_path), sync=sync)

    # -- diagnostics --------------------------------------------------------------------------------------

    def state(self, user_id: int) -> dict[str, Any]:
        """What this process holds for the user (for tests and the benchmark)."""
        loaded = self._loaded.get(user_id)
        if loaded is None:
            return {"loaded": False}
        return {
            "loaded": True,
            "generation": loaded.row.generation,
            "keys": loaded.row.keys,
            "max_key_pk": loaded.row.max_key_pk,
            "nodes": int(loaded.index.get_current_count()),
            "mapped": loaded.keys is not None,
        }

    def forget(self, user_id: int) -> None:
        self._loaded.pop(user_id, None)


_LIVE: weakref.WeakSet[AnnIndexes] = weakref.WeakSet()


@atexit.register
def _stop_builds() -> None:
    """At interpreter exit, before daemon threads are torn down: stop and wait for every build (see the
    module's docstring)."""
    for indexes in list(_LIVE):
        indexes.close()


def _stale(row: IndexRow, matrix: UserMatrix) -> bool:
    """Too many keys deleted from the index, or too many added past its watermark."""
    split = int(np.searchsorted(matrix.key_pks, row.max_key_pk, side="right"))
    return row.deleted > REBUILD_DELETED * max(row.keys, 1) or matrix.n - split > TAIL_MAX


def _capacity(n: int) -> int:
    return max(1024, n + n // 4)


def _dequantized(matrix: UserMatrix, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    out = matrix.vectors[rows].astype(np.float32)
    out *= matrix.scales[rows, None]
    return out


def _unlink(index_path: Path) -> None:
    """An index file, its map and its labels, if any."""
    index_path.unlink(missing_ok=True)
    map_path(index_path).unlink(missing_ok=True)
    annscrub.labels_path(index_path).unlink(missing_ok=True)
