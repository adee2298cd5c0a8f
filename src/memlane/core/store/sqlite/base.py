"""The embedded system of record: one SQLite file (WAL) holding blocks, keys, vectors and the keyword index.

Every read and write names a user, and the queries themselves carry the namespace: callers cannot forget
to filter. One transaction writes a whole ``add`` (blocks, keys, vectors, term rows and statistics), so an
acknowledged add survives kill -9 and never leaves the indexes out of step.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import (
    ConfigError,
    NotFoundError,
    StoreNotFoundError,
)
from memlane.core.store.blocks.filtercache import FilterCache
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.candidates.terms import UserTerms
from memlane.core.store.candidates.usercache import UserCache
from memlane.core.store.candidates.vectors import UserMatrix
from memlane.core.store.check import StoreCheck
from memlane.core.store.sqlite.ann import AnnIndexes
from memlane.core.store.sqlite.annscrub import take_journalled
from memlane.core.store.sqlite.maintenance import sqlite_check, truncate_wal, use_wal
from memlane.core.store.sqlite.probe import open_error, probe_write, store_error
from memlane.core.store.sqlite.schema import migrate
from memlane.core.store.sqlite.terms import TermIds, corpus_problems
from memlane.core.timefmt import from_epoch, now_utc, to_epoch


def json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def json_text(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), sort_keys=True, ensure_ascii=False)


log = logging.getLogger("memlane.store")


BUSY_TIMEOUT_MS = 30_000


# The write-ahead log is cut back to this size after a checkpoint, so a bulk load's log does not stay as
# large as it grew (nor keep old pages' bytes beyond it).
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024


# How long a checkpoint after a deletion waits for readers of older snapshots (other connections mid-read)
# before it is left to the next one: the deletion is done and answered either way.
CHECKPOINT_WAIT_MS = 2000


# 16 KiB pages: a 384-d float32 key vector row (1.6 kB) fits in its B-tree page instead of spilling 600
# bytes onto an overflow page of its own, which made 4 KiB-page stores 2.4 times larger and a cold user
# load twice as slow (measured on x500: 10.6 against 5.2 ms for 2,600 keys; docs/design/003-retrieval.md).
PAGE_SIZE = 16384


def _require_store(path: Path) -> None:
    """StoreNotFoundError unless ``path`` is a memlane store (a schema version set), touching nothing: the
    check's connection sets no journal mode, and an empty file is refused before SQLite would write to it."""
    if not path.is_file() or path.stat().st_size == 0:
        raise StoreNotFoundError(f"no store at {path}")
    try:
        with closing(sqlite3.connect(path)) as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise store_error(f"cannot open the store at {path}", exc, default="cannot open the file") from exc
    if version == 0:
        raise StoreNotFoundError(f"no store at {path} (the file is not a memlane store)")


def time_now() -> float:
    return to_epoch(now_utc())


def ts_of(value: datetime | None) -> float | None:
    return None if value is None else to_epoch(value)


def dt_of(value: float | None) -> datetime | None:
    return None if value is None else from_epoch(value)


class SqliteBase:
    """What every room of the SQLite store stands on: the file, one connection per thread, write transactions
    (``BEGIN IMMEDIATE``, with the deleted vectors scrubbed from the index files after the commit), the caches
    of the users' indexes, the embedding cache, and the store's upkeep (its embedder, checks, compaction)."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: str = "full",
        cache_bytes: int = 2 * 1024**3,
        create: bool = True,
        ann: AnnSettings | None = None,
    ) -> None:
        """``cache_bytes`` bounds each of the two per-user index caches (key vectors, key terms).
        ``create=False`` opens only an existing store: StoreNotFoundError (creating nothing) if there is
        none at ``path``. ``ann``: when large users are searched through an approximate index
        (:class:`memlane.core.store.candidates.annsettings.AnnSettings`; the default indexes users from 20,000 keys)."""
        if durability not in ("full", "normal"):
            raise ConfigError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.path = Path(path)
        self.durability = durability
        self._local = threading.local()
        self._cache: UserCache[UserMatrix] = UserCache(cache_bytes)
        self._terms: UserCache[UserTerms] = UserCache(cache_bytes)
        self._filtered = FilterCache()
        self.term_ids = TermIds()
        self.ann_settings = ann or AnnSettings()
        self.ann = AnnIndexes(self.path, self.ann_settings, self._conn)
        # Each thread's connection, with its thread: a thread that ended has its connection closed when the
        # next one is opened (servers' thread pools end idle threads and start new ones).
        self._conns: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._conns_lock = threading.Lock()
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        else:
            _require_store(self.path)
        try:
            migrate(self._conn())
            # A process died between a deletion's commit and what follows it (the index files' scrub, the
            # checkpoint): both are done now.
            interrupted = self.ann.scrub_journal(sync=self.durability == "full")
        except sqlite3.Error as exc:
            raise store_error(f"cannot open the store at {self.path}", exc) from exc
        if interrupted:
            self.checkpoint()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # takes effect only when the file is created
                use_wal(conn, BUSY_TIMEOUT_MS)
                conn.execute(f"PRAGMA synchronous = {self.durability.upper()}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA temp_store = MEMORY")  # the tokenizer's scratch table
                # Deleted rows are overwritten, so a deleted user's text does not linger in free pages.
                conn.execute("PRAGMA secure_delete = ON")
                conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
            except sqlite3.Error as exc:
                if conn is not None:
                    with suppress(sqlite3.Error):
                        conn.close()
                raise open_error(self.path, exc) from exc
            self._local.conn = conn
            with self._conns_lock:
                ended = [c for t, c in self._conns if not t.is_alive()]
                self._conns = [(t, c) for t, c in self._conns if t.is_alive()]
                self._conns.append((threading.current_thread(), conn))
            for old in ended:
                with suppress(sqlite3.Error):
                    old.close()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) on this thread's connection, for the store's own
        modules (the queue); commits on success, rolls back on any error."""
        with self._write() as conn:
            yield conn

    def query(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """A read on this thread's connection, for the store's own modules."""
        return self._read(sql, params)

    def cache_written(self, user_id: int, prev_version: int, rows: tuple[UserMatrix, UserTerms]) -> None:
        """After our own commit moved the user from ``prev_version`` to ``prev_version + 1`` by adding
        ``rows`` (from :func:`insert_keys`), extend the cached indexes instead of reloading them."""
        matrix, terms = rows
        matrix.version = terms.version = prev_version + 1
        self._cache.append(user_id, prev_version, matrix)
        self._terms.append(user_id, prev_version, terms)

    def cache_drop(self, user_id: int) -> None:
        self._cache.drop(user_id)
        self._terms.drop(user_id)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise store_error(f"cannot start a write transaction on {self.path}", exc) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            take_journalled(conn)  # rolled back: so were the deletions it journalled
            # The original error is the one worth reporting.
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise store_error(f"write failed on {self.path}", exc) from exc
            raise
        if take_journalled(conn):
            # Deleted keys' vectors leave the approximate index's files before the deletion returns.
            try:
                self.ann.scrub_journal(sync=self.durability == "full")
            except sqlite3.Error as exc:
                raise store_error(f"write failed on {self.path}", exc) from exc

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def close(self) -> None:
        """Stop and wait for the index builds this store runs, then close every connection it opened (in
        any thread)."""
        self.ann.close()
        with self._conns_lock:
            for _, conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()

    def bind_embedder(self, model_id: str, dim: int) -> None:
        """Record the embedder on first use; refuse a store whose vectors came from another model."""
        value = json.dumps({"model_id": model_id, "dim": dim})
        with self._write() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta(key, value) VALUES ('embedder', ?)", (value,))
                return
        bound = json.loads(row[0])
        if bound["model_id"] != model_id or bound["dim"] != dim:
            raise ConfigError(
                f"the store {self.path} holds vectors of {bound['model_id']} ({bound['dim']}-d); "
                f"it cannot be searched with {model_id} ({dim}-d)"
            )

    def _user_row(self, user: str) -> tuple[int, int] | None:
        rows = self._read("SELECT id, version FROM users WHERE name = ?", (user,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def _read_with(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self._conn(), *args, **kwargs)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def _require_user_id(self, conn: sqlite3.Connection, user: str) -> int:
        row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
        if row is None:
            raise NotFoundError(f"user {user!r} not found")
        return int(row[0])

    def compact(self) -> tuple[int, int]:
        """Rewrite the file with :data:`PAGE_SIZE` pages, each user's rows contiguous and no free pages;
        returns its size in bytes before and after (:func:`memlane.core.store.sqlite.maintenance.compact`)."""
        from memlane.core.store.sqlite.maintenance import compact

        return compact(self._conn(), self.path, PAGE_SIZE)

    def checkpoint(self) -> bool:
        """Copy the write-ahead log into the file and truncate it to nothing: after a deletion, the deleted
        rows' words are then in neither file (the file's own pages are overwritten: ``secure_delete``).
        Waits at most :data:`CHECKPOINT_WAIT_MS` for readers of older snapshots; False (logged) if one kept
        it from finishing, which the next checkpoint then does."""
        try:
            done = truncate_wal(self._conn(), CHECKPOINT_WAIT_MS, BUSY_TIMEOUT_MS)
        except sqlite3.Error as exc:
            raise store_error(f"checkpoint failed on {self.path}", exc) from exc
        if not done:
            log.warning("the store's write-ahead log could not be truncated now (a reader holds it)")
        return done

    def page_size(self) -> int:
        return int(self._read("PRAGMA page_size")[0][0])

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """Free space, then one committed row (:mod:`memlane.core.store.sqlite.probe`); StoreError with a
        reason when the store cannot take a write."""
        probe_write(self._conn(), self.path, timeout_s, BUSY_TIMEOUT_MS)

    def integrity_check(self) -> list[str]:
        """SQLite's integrity check, then the keyword index against the keys (counts, totals, every
        term's document frequency); an empty list means healthy."""
        return list(self.check().problems)

    def check(self, *, quick: bool = False) -> StoreCheck:
        """SQLite's ``integrity_check`` (``quick_check`` with ``quick``: the pages and records, not whether
        every index matches its table) and, unless ``quick``, memlane's own: the key segments and the
        keyword index against the keys. A damaged page that stops a check is a problem, not an error."""
        conn = self._conn()
        found = sqlite_check(conn, quick=quick)
        if quick:
            return found
        try:
            problems = corpus_problems(conn)
        except sqlite3.Error as exc:
            problems = [f"keyword index: {exc}"]
        return found + StoreCheck(("memlane's key segments and keyword index against the keys",), tuple(problems))

    # -- the embedding cache ---------------------------------------------------------------------------

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        out: dict[str, Vectors] = {}
        for start in range(0, len(hashes), 500):
            chunk = list(hashes[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for h, blob in self._read(
                f"SELECT hash, vector FROM embed_cache WHERE model_id = ? AND hash IN ({marks})",
                [model_id, *chunk],
            ):
                out[str(h)] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None:
        with self._write() as conn:
            self.put_vectors_in(conn, model_id, items)

    @staticmethod
    def put_vectors_in(conn: sqlite3.Connection, model_id: str, items: dict[str, Vectors]) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO embed_cache(model_id, hash, vector) VALUES (?,?,?)",
            [(model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
        )
