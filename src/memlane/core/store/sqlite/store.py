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
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import (
    AlreadyExistsError,
    ConfigError,
    NotFoundError,
    StoreError,
    StoreNotFoundError,
    ValidationError,
)
from memlane.core.jobs import EXTRACT_KIND
from memlane.core.model import (
    DeletedUser,
    ExtractionStatus,
    Filters,
    KeyRecord,
    MemoryBlock,
    Page,
    Prompt,
    PromptVersion,
    Session,
    StoredKey,
    UserInfo,
)
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts, people_words
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.annsettings import AnnSettings, IndexStatus
from memlane.core.store.cache import UserCache
from memlane.core.store.check import StoreCheck
from memlane.core.store.gather import Gather, Gathered, gather_stepwise
from memlane.core.store.rows import FULL_BLOCK_COLUMNS as BLOCK_COLUMNS
from memlane.core.store.rows import continue_sessions, row_to_block
from memlane.core.store.sqlite import accounts, expiry
from memlane.core.store.sqlite import model as mm
from memlane.core.store.sqlite.ann import AnnIndexes, drop_user
from memlane.core.store.sqlite.ann import status as ann_status
from memlane.core.store.sqlite.annscrub import take_journalled
from memlane.core.store.sqlite.keys import delete_keys, insert_keys, load_user_index, retire_keys
from memlane.core.store.sqlite.maintenance import sqlite_check, truncate_wal, use_wal
from memlane.core.store.sqlite.model import LIVE
from memlane.core.store.sqlite.probe import open_error, probe_write, store_error
from memlane.core.store.sqlite.schema import migrate
from memlane.core.store.sqlite.terms import TermIds, corpus_problems, query_weights
from memlane.core.store.terms import UserTerms, bm25_top_blocks, session_word_counts
from memlane.core.store.vectors import KIND_CODES, BlockSet, UserMatrix, top_blocks
from memlane.core.timefmt import from_epoch, now_utc, to_epoch

if TYPE_CHECKING:
    from memlane.core.store.sqlite.queue import SqliteJobQueue

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
# A filter that keeps fewer blocks than this share of a user's keys is searched exactly over what it keeps,
# not through the approximate index (docs/design/007-memory-model.md, "Filters").
ANN_MIN_SHARE = 0.05


# (query, data_version, total_changes) and the query's weights then: see SqliteStore._query_weights
_QueryMemo = tuple[tuple[str, int, int], tuple[list[tuple[int, float]], float]]


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


class SqliteStore:
    """SQLite store. Thread-safe: each thread gets its own connection; SQLite serialises the writers.

    ``durability="full"`` fsyncs every commit (an acknowledged write survives power loss);
    ``"normal"`` survives process crashes (kill -9) but may lose the last commits on power loss.
    """

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
        (:class:`memlane.core.store.annsettings.AnnSettings`; the default indexes users from 20,000 keys)."""
        if durability not in ("full", "normal"):
            raise ConfigError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.path = Path(path)
        self.durability = durability
        self._local = threading.local()
        self._cache: UserCache[UserMatrix] = UserCache(cache_bytes)
        self._terms: UserCache[UserTerms] = UserCache(cache_bytes)
        self._filtered = mm.FilterCache()
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

    # -- connections and transactions -------------------------------------------------------------------

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

    # -- settings bound to the file ----------------------------------------------------------------------

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

    # -- users -------------------------------------------------------------------------------------------

    def _user_row(self, user: str) -> tuple[int, int] | None:
        rows = self._read("SELECT id, version FROM users WHERE name = ?", (user,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        """Create a namespace with its display name and metadata; returns False (changing nothing) if it
        already existed."""
        with self._write() as conn:
            user_id, _, created = accounts.ensure_user(conn, user, to_epoch(now_utc()), None)
            if created:
                mm.set_user_fields(conn, user_id, display_name, metadata)
            return created

    def deletion_epoch(self) -> int:
        """The store's deletion epoch: what an add reads before its slow part (core/store/deletions.py)."""
        return accounts.deletion_epoch(self._conn())

    # -- API keys (memlane.core.apikeys makes and checks them) ----------------------------------------------

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        with self._write() as conn:
            return accounts.add_key(conn, user, key_id, secret_sha256, label, created_at, role)

    def get_api_key(self, key_id: str) -> StoredKey | None:
        try:
            return accounts.get_key(self._conn(), key_id)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def list_api_keys(self, user: str) -> list[KeyRecord]:
        try:
            return accounts.list_keys(self._conn(), user)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        with self._write() as conn:
            return accounts.revoke_key(conn, user, key_id)

    def list_users(self) -> list[UserInfo]:
        now = _now()
        rows = self._read(f"SELECT {mm.USER_COLUMNS} FROM users u ORDER BY u.name", (now, now))
        return [mm.user_info(r) for r in rows]

    # -- writes ------------------------------------------------------------------------------------------

    def write_blocks(
        self,
        user: str,
        blocks: Sequence[MemoryBlock],
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
        *,
        enqueue_attempts: int = 0,
        epoch: int | None = None,
        default_ttl_s: int = 0,
    ) -> list[int]:
        """Store blocks with their message vectors in one transaction (the whole add, or nothing).

        ``cache_entries`` (model id, {content hash: vector}) are written to the embedding cache in the
        same transaction. ``enqueue_attempts`` > 0 enqueues one extraction job per block in that same
        transaction, allowed that many attempts; their ids are returned. ``epoch``: the deletion epoch the
        add read when it began; UserDeletedError (nothing written) if the user was deleted since.
        Sessions and expiries as the protocol says (:meth:`memlane.core.store.protocol.Store.write_blocks`)."""
        if len(blocks) != len(vectors):
            raise StoreError(f"{len(blocks)} blocks but {len(vectors)} vectors")
        with self._write() as conn:
            now = to_epoch(now_utc())
            user_id, version, _ = accounts.ensure_user(conn, user, now, epoch)
            ttls = mm.open_sessions(conn, user, user_id, blocks, now)
            blocks = [
                replace(
                    b,
                    expires_at=_dt(
                        mm.expiry(to_epoch(b.ingest_time), mm.effective_ttl(b.ttl_s, ttls[b.session_id], default_ttl_s))
                    ),
                    last_queued_at=now_utc() if enqueue_attempts else None,
                )
                for b in blocks
            ]
            rows, job_ids = self._insert_blocks(conn, user_id, blocks, vectors, enqueue_attempts)
            if cache_entries and cache_entries[1]:
                self.put_vectors_in(conn, *cache_entries)
            conn.execute("UPDATE users SET version = version + 1 WHERE id = ?", (user_id,))
        self.cache_written(user_id, version, rows)
        return job_ids

    def job_queue(self) -> SqliteJobQueue:
        """The extraction queue kept in this store's file."""
        from memlane.core.store.sqlite.queue import SqliteJobQueue

        return SqliteJobQueue(self)

    def _insert_blocks(
        self, conn: sqlite3.Connection, user_id: int, blocks: Sequence[MemoryBlock], vectors: Vectors, enqueue: int
    ) -> tuple[tuple[UserMatrix, UserTerms], list[int]]:
        """Insert blocks and their message keys; with ``enqueue`` > 0, one extraction job per block (at most
        ``enqueue`` attempts) in the same transaction: the outbox. Exchange indexes continue the session's
        (:func:`memlane.core.store.rows.continue_sessions`)."""
        block_pks: list[int] = []
        now = to_epoch(now_utc())

        def last_index(conversation: str, session: str) -> int | None:
            row = conn.execute(
                "SELECT max(exchange_index) FROM blocks WHERE user_id = ? AND conversation_id = ? AND session_id = ?",
                (user_id, conversation, session),
            ).fetchone()
            return None if row is None or row[0] is None else int(row[0])

        blocks = continue_sessions(blocks, last_index)
        for b in blocks:
            cur = conn.execute(
                "INSERT INTO blocks(id, user_id, conversation_id, session_id, exchange_index, perspective, mode, "
                "message, summary, contexts, message_ids, event_ts, ingest_ts, time_annotation, "
                "extraction_status, extraction_prompt, content_hash, annotations, kind, sides, ttl_s, expires_ts, "
                "updated_ts, prompt_id, prompt_version, fail_count, last_queued_ts) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    b.id, user_id, b.conversation_id, b.session_id, b.exchange_index, b.perspective,
                    b.mode.value, b.message, b.summary, json.dumps(list(b.contexts)),
                    json.dumps(list(b.message_ids)), to_epoch(b.event_time), to_epoch(b.ingest_time),
                    b.time_annotation, b.extraction_status.value, b.extraction_prompt, b.content_hash,
                    json.dumps(b.annotations, sort_keys=True), b.kind.value, json.dumps([list(x) for x in b.sides]),
                    b.ttl_s, _ts(b.expires_at), _ts(b.updated_at), b.prompt_id, b.prompt_version, b.fail_count,
                    _ts(b.last_queued_at),
                ),
            )  # fmt: skip
            block_pks.append(int(cur.lastrowid or 0))
        job_ids = [
            int(
                conn.execute(
                    "INSERT INTO jobs(kind, user_id, block_pk, status, run_after, max_attempts, created_at, "
                    "updated_at) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
                    (EXTRACT_KIND, user_id, pk, now, enqueue, now, now),
                ).lastrowid
                or 0
            )
            for pk in (block_pks if enqueue else [])
        ]
        rows = insert_keys(
            conn,
            user_id,
            [
                (
                    pk,
                    "message",
                    b.message,
                    b.content_hash,
                    to_epoch(b.event_time),
                    b.session_id,
                    people_words(b.message, b.mode, b.perspective),
                )
                for pk, b in zip(block_pks, blocks, strict=True)
            ],
            vectors,
            self.term_ids,
        )
        return rows, job_ids

    def delete_block(self, user: str, block_id: str) -> MemoryBlock:
        """Delete one block with its keys, vectors and term rows, and return it as it was; NotFoundError if
        not the user's."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT b.pk, u.id FROM blocks b JOIN users u ON u.id = b.user_id WHERE b.id = ? AND u.name = ?",
                (block_id, user),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
            block_pk, user_id = row
            (block,) = expiry.blocks_by_pk(conn, [int(block_pk)])
            expiry.delete_blocks(conn, int(user_id), [int(block_pk)])
        self.cache_drop(user_id)
        self.checkpoint()
        return block

    def delete_blocks(self, user: str, filters: Filters) -> list[MemoryBlock]:
        """Delete the user's blocks that pass ``filters`` in one write transaction, through the path every
        delete takes (:func:`memlane.core.store.sqlite.expiry.delete_blocks`), and return them as they were."""
        where, params = mm.filter_sql(filters)
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                return []
            user_id = int(row[0])
            found = conn.execute(f"SELECT b.pk FROM blocks b WHERE b.user_id = ? AND {where}", (user_id, *params))
            pks = [int(r[0]) for r in found]
            blocks = expiry.blocks_by_pk(conn, pks)
            expiry.delete_blocks(conn, user_id, pks)
        if pks:
            self.cache_drop(user_id)
            self.checkpoint()
        return blocks

    # -- retention (memlane.core.retention) ----------------------------------------------------------------

    def retention_policies(self) -> Policies:
        try:
            return expiry.read_policies(self._conn())
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        with self._write() as conn:
            expiry.write_policy(conn, user, policy, to_epoch(now_utc()))

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        """The user's blocks older than ``before`` (event time) or beyond the ``keep`` newest, at most
        ``limit`` of them, decided and (unless ``dry_run``) deleted in one write transaction; an unknown
        user has none."""
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                return Expired(0, [], 0)
            user_id = int(row[0])
            pks = expiry.expired_pks(conn, user_id, before, keep, limit)
            blocks = [] if dry_run else expiry.blocks_by_pk(conn, pks)
            if not dry_run:
                expiry.delete_blocks(conn, user_id, pks)
            remaining = expiry.count_blocks(conn, user_id) - (len(pks) if dry_run else 0)
        if pks and not dry_run:
            self.cache_drop(user_id)
            self.checkpoint()
        return Expired(len(pks), blocks, remaining)

    def delete_user(self, user: str) -> DeletedUser:
        """Remove the user and everything of theirs (blocks, search keys, vectors, term rows, the terms only
        they used, cached vectors no other user shares, API keys), and record the deletion so that no add
        in flight brings them back. NotFoundError for an unknown user."""
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                raise NotFoundError(f"user {user!r} not found")
            user_id = int(row[0])
            conn.execute(
                "DELETE FROM embed_cache WHERE hash IN (SELECT content_hash FROM search_keys WHERE user_id = ?) "
                "AND hash NOT IN (SELECT content_hash FROM search_keys WHERE user_id != ?)",
                (user_id, user_id),
            )
            delete_keys(conn, "user_id = ?", (user_id,))
            conn.execute("DELETE FROM key_segments WHERE user_id = ?", (user_id,))  # what retired keys still held
            conn.execute("DELETE FROM dead_keys WHERE user_id = ?", (user_id,))
            n = conn.execute("DELETE FROM blocks WHERE user_id = ?", (user_id,)).rowcount
            conn.execute("DELETE FROM jobs WHERE user_id = ?", (user_id,))
            drop_user(conn, self.path, user_id)
            keys = conn.execute("DELETE FROM api_keys WHERE user_id = ?", (user_id,)).rowcount
            conn.execute("DELETE FROM retention_policies WHERE user_id = ?", (user_id,))
            conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))
            conn.execute("DELETE FROM users WHERE id = ?", (user_id,))
            accounts.record_deletion(conn, user, to_epoch(now_utc()))
        self.cache_drop(user_id)
        self.ann.forget(user_id)
        self.checkpoint()
        return DeletedUser(blocks=int(n), keys=int(keys))

    # -- reads -------------------------------------------------------------------------------------------

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE b.id = ? AND u.name = ? "
            f"AND {LIVE}",
            (block_id, user, _now()),
        )
        if not rows:
            raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
        return row_to_block(rows[0])

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        now = _now()
        # The block by its id, then its exchange through blocks_user_session (user, conversation, session,
        # exchange index): a few rows, whatever the user's size.
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} FROM blocks x JOIN users u ON u.id = x.user_id JOIN blocks b "
            "ON b.user_id = x.user_id AND b.conversation_id = x.conversation_id AND b.session_id = x.session_id "
            "AND b.exchange_index = x.exchange_index "
            f"WHERE x.id = ? AND u.name = ? AND (x.expires_ts IS NULL OR x.expires_ts > ?) AND {LIVE} "
            "AND b.ingest_ts = x.ingest_ts AND b.content_hash = x.content_hash "
            "ORDER BY b.id <> x.id, b.perspective, b.id",
            (block_id, user, now, now),
        )
        if not rows:
            raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
        return [row_to_block(r) for r in rows]

    def list_blocks(
        self,
        user: str,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryBlock]:
        """The user's blocks in event order (then exchange order)."""
        where, params = _block_filter(user, conversation_id, session_id, _now())
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE {where} "
            "ORDER BY b.event_ts, b.conversation_id, b.session_id, b.exchange_index, b.pk LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return [row_to_block(r) for r in rows]

    def count_blocks(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """How many blocks :meth:`list_blocks` pages through (counted as :func:`mm.live_count` counts)."""
        row = self._user_row(user)
        if row is None:
            return 0
        where: list[str] = ["b.user_id = ?"]
        params: list[object] = [row[0]]
        if conversation_id is not None:
            where.append("b.conversation_id = ?")
            params.append(conversation_id)
        if session_id is not None:
            where.append("b.session_id = ?")
            params.append(session_id)
        cond = " AND ".join(where)
        rows = self._read(f"SELECT {mm.live_count(cond)}", [*params, *params, _now()])
        return int(rows[0][0])

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]:
        """Blocks by internal reference, only those of ``user`` (and live)."""
        now = _now()
        row = self._user_row(user)
        if row is None:
            return {}
        out: dict[int, MemoryBlock] = {}
        for start in range(0, len(refs), 500):
            chunk = list(refs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            # "+b.user_id" keeps the planner on the primary key: via the user index it would scan every
            # block of a large user to find ten.
            rows = self._read(
                f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id "
                f"WHERE b.pk IN ({marks}) AND +b.user_id = ? AND {LIVE}",
                [*chunk, row[0], now],
            )
            for r in rows:
                out[int(r[0])] = row_to_block(r)
        return out

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time) of the user's blocks by reference, without their text."""
        row = self._user_row(user)
        if row is None:
            return {}
        out: dict[int, tuple[str, int, float]] = {}
        for start in range(0, len(refs), 500):
            chunk = list(refs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._read(
                f"SELECT pk, session_id, exchange_index, event_ts FROM blocks WHERE pk IN ({marks}) AND +user_id = ?",
                [*chunk, row[0]],
            )
            out.update({int(pk): (str(session), int(exchange), float(ts)) for pk, session, exchange, ts in rows})
        return out

    def vector_candidates(
        self,
        user: str,
        query: Vectors,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        """Cosine top-k blocks of ``user`` (block reference, similarity): an exact scan, or for a user past
        the approximate index's threshold the index's candidates and the keys added since it was saved,
        scored exactly (:mod:`memlane.core.store.sqlite.ann`). Filters and expiry as the protocol says: a
        filter that keeps few keys is scored exactly over what it keeps."""
        row = self._user_row(user)
        if row is None:
            return []
        matrix = self._matrix(*row)
        blocks = self._block_set(*row, filters, now)
        codes = None if kinds is None else frozenset(KIND_CODES[x] for x in kinds)
        if self.ann_settings.applies(matrix.n) and not _too_narrow(blocks, matrix):
            found = self.ann.top_blocks(
                row[0], matrix, query, k, kinds=codes, after=after, before=before, blocks=blocks
            )
            if found is not None:
                return found
        return top_blocks(matrix, query.reshape(-1), k, kinds=codes, after=after, before=before, blocks=blocks)

    def _block_set(self, user_id: int, version: int, filters: Filters | None, now: float | None) -> BlockSet | None:
        """What filters and expiry leave of the user's blocks: the allowed blocks when a pre-cut rule is
        given, else the expired blocks to leave out (None when there are none: the unfiltered search). The
        blocks a filter keeps are remembered for the user's version (any write moves it on); the expired
        ones are asked for each time (one seek in the partial expiry index)."""
        at = _now() if now is None else now
        conn = self._conn()
        try:
            expired = mm.expired_block_pks(conn, user_id, at)
            if filters is None or filters.pre.empty:
                return BlockSet.of(expired, allow=False) if expired else None
            pre = filters.pre
            allowed = self._filtered.get(user_id, version, pre)
            if allowed is None:
                allowed = BlockSet.of(mm.filtered_block_pks(conn, user_id, pre), allow=True)
                self._filtered.put(user_id, version, pre, allowed)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
        return allowed.without(expired) if expired else allowed

    def build_index(self, user: str) -> IndexStatus:
        """Build the user's approximate index now, or bring it up to date (every key added since it was
        saved), and save it, if the user is at or past the threshold (:mod:`memlane.core.store.sqlite.ann`)."""
        row = self._user_row(user)
        if row is None:
            raise NotFoundError(f"user {user!r} not found")
        matrix = self._matrix(*row)
        if matrix.n and self.ann_settings.applies(matrix.n):
            self.ann.build_now(row[0], matrix)
        return ann_status(self._conn(), self.path, self.ann_settings, row[0], user)

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: of every user, by name) stands."""
        rows = self._read("SELECT id, name FROM users" + (" WHERE name = ?" if user is not None else " ORDER BY name"),
                          () if user is None else (user,))  # fmt: skip
        if user is not None and not rows:
            raise NotFoundError(f"user {user!r} not found")
        return [ann_status(self._conn(), self.path, self.ann_settings, int(r[0]), str(r[1])) for r in rows]

    def _matrix(self, user_id: int, version: int) -> UserMatrix:
        cached = self._cache.get(user_id, version)
        return cached if cached is not None else self._load(user_id)[0]

    def _user_terms(self, user_id: int, version: int) -> UserTerms:
        cached = self._terms.get(user_id, version)
        return cached if cached is not None else self._load(user_id)[1]

    def _load(self, user_id: int) -> tuple[UserMatrix, UserTerms]:
        """Read the user's version and both indexes (one read of the user's segments) in one snapshot, so
        the cache entries are exactly that version; cache both."""
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            (version,) = conn.execute("SELECT version FROM users WHERE id = ?", (user_id,)).fetchone()
            matrix, terms = load_user_index(conn, user_id, int(version))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
        self._cache.put(user_id, matrix)
        self._terms.put(user_id, terms)
        return matrix, terms

    def keyword_candidates(
        self,
        user: str,
        query: str,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
        k1: float = BM25_K1,
        b: float = BM25_B,
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 top-k blocks of ``user`` (block reference, BM25 score, higher is better); filters and
        expiry narrow the ranked keys, not the statistics."""
        row = self._user_row(user)
        if row is None:
            return []
        weights, avgdl = self._query_weights(query)
        if not weights:
            return []
        index = self._user_terms(*row)
        blocks = self._block_set(*row, filters, now)
        codes = None if kinds is None else frozenset(KIND_CODES[x] for x in kinds)
        return bm25_top_blocks(
            index, weights, avgdl, k, kinds=codes, after=after, before=before, k1=k1, b=b, blocks=blocks
        )

    def gather(self, user: str, ask: Gather) -> Gathered:
        """A search's reads, one method each: every read is in process here."""
        return gather_stepwise(self, user, ask)

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """The query terms' counts in the user's sessions' people's words
        (:func:`memlane.core.store.terms.session_word_counts`); None when nothing can match."""
        row = self._user_row(user)
        if row is None or not sessions:
            return None
        weights, _ = self._query_weights(query)
        if not weights:
            return None
        return session_word_counts(self._user_terms(*row), [term for term, _ in weights], sessions)

    def _query_weights(self, query: str) -> tuple[list[tuple[int, float]], float]:
        """:func:`query_weights`, remembered for this thread's last query while the database is unchanged:
        a search asks for the same query's terms twice (its keyword candidates, then the session-words
        ranking), and their lookup costs 0.2-0.8 ms on an x500 user. Unchanged means no commit by another
        connection (``PRAGMA data_version``) and no row changed by this one (``total_changes``)."""
        conn = self._conn()
        try:
            (data_version,) = conn.execute("PRAGMA data_version").fetchone()
            memo: _QueryMemo | None = getattr(self._local, "query_memo", None)
            if memo is not None and memo[0] == (query, int(data_version), conn.total_changes):
                weights, avgdl = memo[1]
                return weights, avgdl
            result = query_weights(conn, query)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
        # Changes counted after the lookup: tokenizing writes a scratch table of this connection. The data
        # version read before it: a commit elsewhere during the lookup makes the memo miss next time.
        self._local.query_memo = ((query, int(data_version), conn.total_changes), result)
        return result

    # -- the memory model (docs/design/007-memory-model.md) ---------------------------------------------

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

    def get_user(self, user: str) -> UserInfo:
        info: UserInfo = self._read_with(mm.get_user, user, _now())
        return info

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        with self._write() as conn:
            mm.set_user_fields(conn, self._require_user_id(conn, user), display_name, metadata)
        return self.get_user(user)

    def find_users(
        self,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        contains: str | None = None,
        metadata_text: Mapping[str, str] | None = None,
    ) -> Page[UserInfo]:
        page: Page[UserInfo] = self._read_with(
            mm.find_users,
            name=name,
            metadata=metadata,
            limit=limit,
            offset=offset,
            now=_now(),
            contains=contains,
            metadata_text=metadata_text,
        )
        return page

    def create_session(
        self,
        user: str,
        session_id: str,
        *,
        conversation_id: str,
        started_at: float,
        annotations: Mapping[str, str],
        metadata: Mapping[str, Any],
        default_ttl_s: int | None,
        exist_ok: bool = False,
        now: float,
    ) -> Session:
        with self._write() as conn:
            user_id = self._require_user_id(conn, user)
            created = mm.insert_session(
                conn,
                user_id,
                session_id,
                conversation_id=conversation_id,
                started_at=started_at,
                annotations=annotations,
                metadata=metadata,
                default_ttl_s=default_ttl_s,
                now=now,
            )
            if not created and not exist_ok:
                raise AlreadyExistsError("session", session_id)
            return mm.get_session(conn, user, session_id, now)

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        found: Session = self._read_with(mm.get_session, user, session_id, now)
        return found

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        page: Page[Session] = self._read_with(mm.list_sessions, user, limit, offset, now)
        return page

    def update_session(
        self,
        user: str,
        session_id: str,
        *,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
        now: float,
    ) -> Session:
        with self._write() as conn:
            user_id = self._require_user_id(conn, user)
            mm.update_session(
                conn, user, user_id, session_id, annotations=annotations, metadata=metadata, default_ttl_s=default_ttl_s
            )
            return mm.get_session(conn, user, session_id, now)

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        with self._write() as conn:
            mm.end_session(conn, user, self._require_user_id(conn, user), session_id, at)
            return mm.get_session(conn, user, session_id, now)

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        with self._write() as conn:
            user_id = self._require_user_id(conn, user)
            if mm.session_state(conn, user_id, session_id) is None:
                raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = ? AND session_id = ?", (user_id, session_id)
                ).fetchall()
            ]
            blocks = expiry.blocks_by_pk(conn, pks)
            expiry.delete_blocks(conn, user_id, pks)
            conn.execute("DELETE FROM sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id))
        if pks:
            self.cache_drop(user_id)
            self.checkpoint()
        return blocks

    def update_block(
        self,
        user: str,
        block: MemoryBlock,
        vectors: Vectors | None,
        *,
        reset_ttl: bool = False,
        default_ttl_s: int = 0,
        enqueue_attempts: int = 0,
        now: float,
    ) -> MemoryBlock:
        """Replace the block in place, in one transaction (:meth:`memlane.core.store.protocol.Store.update_block`)."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT b.pk, u.id, u.version, b.session_id, b.event_ts, b.expires_ts, b.mode, b.perspective, "
                "b.annotations FROM blocks b JOIN users u ON u.id = b.user_id "
                f"WHERE b.id = ? AND u.name = ? AND {LIVE}",
                (block.id, user, now),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"block {block.id!r} not found for user {user!r}")
            pk, user_id, session_id, event_ts, expires_ts = int(row[0]), int(row[1]), str(row[3]), float(row[4]), row[5]
            annotations = json.dumps(block.annotations, sort_keys=True)
            # New text, or new labels: what they replace must leave the write-ahead log, as a deletion's does.
            removes = vectors is not None or annotations != row[8]
            session_ttl = mm.require_open(conn, user, user_id, session_id)
            if reset_ttl:
                expires_ts = mm.expiry(now, mm.effective_ttl(block.ttl_s, session_ttl, default_ttl_s))
            if vectors is not None:
                self._drop_cached_texts(conn, user_id, [pk])
                retire_keys(conn, user_id, pk, self.term_ids)
                insert_keys(
                    conn,
                    user_id,
                    [(pk, "message", block.message, block.content_hash, event_ts, session_id,
                      people_words(block.message, block.mode, block.perspective))],
                    vectors,
                    self.term_ids,
                )  # fmt: skip
            status = block.extraction_status
            queued = _ts(block.last_queued_at)
            if enqueue_attempts or vectors is not None:
                conn.execute("DELETE FROM jobs WHERE block_pk = ? AND +user_id = ?", (pk, user_id))
            if enqueue_attempts:
                conn.execute(
                    "INSERT INTO jobs(kind, user_id, block_pk, status, run_after, max_attempts, created_at, "
                    "updated_at) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
                    (EXTRACT_KIND, user_id, pk, now, enqueue_attempts, now, now),
                )
                status, queued = ExtractionStatus.QUEUED, now
            conn.execute(
                "UPDATE blocks SET message = ?, content_hash = ?, summary = ?, contexts = ?, annotations = ?, "
                "kind = ?, sides = ?, ttl_s = ?, expires_ts = ?, updated_ts = ?, prompt_id = ?, prompt_version = ?, "
                "extraction_status = ?, extraction_prompt = ?, last_queued_ts = ? WHERE pk = ?",
                (
                    block.message, block.content_hash, block.summary, json.dumps(list(block.contexts)),
                    annotations, block.kind.value,
                    json.dumps([list(x) for x in block.sides]), block.ttl_s, expires_ts, now, block.prompt_id,
                    block.prompt_version, status.value, block.extraction_prompt, queued, pk,
                ),
            )  # fmt: skip
            conn.execute("UPDATE users SET version = version + 1 WHERE id = ?", (user_id,))
            (stored,) = expiry.blocks_by_pk(conn, [pk])
        if vectors is not None:
            self.cache_drop(user_id)
        if removes:
            self.checkpoint()
        return stored

    @staticmethod
    def _drop_cached_texts(conn: sqlite3.Connection, user_id: int, pks: Sequence[int]) -> None:
        """Delete the cached vectors of the blocks' key texts that no other key uses (what an update
        replaces must not linger in the embedding cache)."""
        models = [str(r[0]) for r in conn.execute(expiry.CACHED_MODELS)]
        if not models:
            return
        marks = ",".join("?" * len(pks))
        params = (*pks, user_id)
        # By (model, hash): the cache's primary key; by hash alone SQLite would scan the whole cache.
        conn.execute(
            f"DELETE FROM embed_cache WHERE model_id IN ({','.join('?' * len(models))}) AND hash IN "
            f"(SELECT content_hash FROM search_keys WHERE block_pk IN ({marks}) AND +user_id = ?) "
            "AND NOT EXISTS (SELECT 1 FROM search_keys k WHERE k.content_hash = embed_cache.hash "
            f"AND NOT (k.block_pk IN ({marks}) AND k.user_id = ?))",
            (*models, *params, *params),
        )

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
        now: float,
    ) -> int:
        with self._write() as conn:
            user_id = self._require_user_id(conn, user)
            n = mm.set_ttl(conn, user, user_id, ttl_s, session_id=session_id, block_ids=block_ids, now=now)
        return n

    def browse_blocks(
        self,
        user: str,
        filters: Filters | None,
        *,
        order: str,
        limit: int,
        offset: int,
        after: float | None = None,
        before: float | None = None,
        now: float,
    ) -> Page[MemoryBlock]:
        if order not in ("ingested", "event"):
            raise ValidationError("must be 'ingested' or 'event'", where="order")
        where, params = mm.filter_sql(filters, after=after, before=before)
        by = "b.ingest_ts DESC, b.id DESC" if order == "ingested" else "b.event_ts DESC, b.id DESC"
        base = f"FROM blocks b JOIN users u ON u.id = b.user_id WHERE u.name = ? AND {LIVE} AND {where}"
        total = int(self._read(f"SELECT count(*) {base}", (user, now, *params))[0][0])
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} {base} ORDER BY {by} LIMIT ? OFFSET ?", (user, now, *params, limit, offset)
        )
        return Page([row_to_block(r) for r in rows], total, limit, offset)

    def expired_users(self, now: float) -> list[str]:
        rows = self._read(
            "SELECT DISTINCT u.name FROM blocks b JOIN users u ON u.id = b.user_id "
            "WHERE b.expires_ts IS NOT NULL AND b.expires_ts <= ? ORDER BY u.name",
            (now,),
        )
        return [str(r[0]) for r in rows]

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                return []
            user_id = int(row[0])
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = ? AND expires_ts IS NOT NULL AND expires_ts <= ? "
                    "ORDER BY expires_ts, pk LIMIT ?",
                    (user_id, now, -1 if limit is None else limit),
                ).fetchall()
            ]
            blocks = expiry.blocks_by_pk(conn, pks)
            if not dry_run:
                expiry.delete_blocks(conn, user_id, pks)
        if pks and not dry_run:
            self.cache_drop(user_id)
            self.checkpoint()
        return blocks

    def requeue_block(self, user: str, block_id: str, *, max_attempts: int, now: float) -> MemoryBlock:
        with self._write() as conn:
            row = conn.execute(
                "SELECT b.pk, u.id, b.extraction_status FROM blocks b JOIN users u ON u.id = b.user_id "
                f"WHERE b.id = ? AND u.name = ? AND {LIVE}",
                (block_id, user, now),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
            pk, user_id, status = int(row[0]), int(row[1]), str(row[2])
            if status != ExtractionStatus.FAILED.value:
                raise ValidationError(f"the block's extraction has not failed (it is {status})", where="block_id")
            conn.execute("DELETE FROM jobs WHERE block_pk = ? AND +user_id = ?", (pk, user_id))
            conn.execute(
                "INSERT INTO jobs(kind, user_id, block_pk, status, run_after, max_attempts, created_at, "
                "updated_at) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
                (EXTRACT_KIND, user_id, pk, now, max_attempts, now, now),
            )
            conn.execute(
                "UPDATE blocks SET extraction_status = ?, last_queued_ts = ? WHERE pk = ?",
                (ExtractionStatus.QUEUED.value, now, pk),
            )
            (stored,) = expiry.blocks_by_pk(conn, [pk])
        return stored

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        with self._write() as conn:
            return mm.create_prompt(conn, prompt_id, text, description, annotations, now)

    def get_prompt(self, prompt_id: str) -> Prompt:
        found: Prompt = self._read_with(mm.get_prompt, prompt_id)
        return found

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        found: PromptVersion = self._read_with(mm.get_version, prompt_id, version)
        return found

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        page: Page[Prompt] = self._read_with(mm.list_prompts, limit, offset, include_archived)
        return page

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        page: Page[PromptVersion] = self._read_with(mm.list_versions, prompt_id, limit, offset)
        return page

    def update_prompt(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
        now: float,
    ) -> Prompt:
        with self._write() as conn:
            return mm.update_prompt(
                conn, prompt_id, text=text, description=description, annotations=annotations, now=now
            )

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        with self._write() as conn:
            return mm.archive_prompt(conn, prompt_id, version, now)

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        with self._write() as conn:
            return mm.purge_prompt(conn, prompt_id, version)

    # -- embedding cache ---------------------------------------------------------------------------------

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

    # -- maintenance -------------------------------------------------------------------------------------

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

    # -- diagnostics -------------------------------------------------------------------------------------

    def user_row_counts(self, user: str) -> dict[str, int]:
        """Rows each table holds for ``user`` (by name or by its namespace token): for deletion checks."""
        out: dict[str, int] = {}
        row = self._user_row(user)
        uid = row[0] if row else -1
        for table in (
            "blocks", "search_keys", "key_segments", "jobs", "api_keys", "retention_policies", "ann_index", "sessions",
        ):  # fmt: skip
            out[table] = int(self._read(f"SELECT count(*) FROM {table} WHERE user_id = ?", (uid,))[0][0])
        # Keys whose vector and term bag the user's segments hold (the rows of PostgreSQL's key_vectors)
        keys = int(self._read("SELECT coalesce(sum(keys), 0) FROM key_segments WHERE user_id = ?", (uid,))[0][0])
        out["key_vectors"] = out["key_terms"] = keys
        out["users"] = int(self._read("SELECT count(*) FROM users WHERE name = ?", (user,))[0][0])
        return out

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


def _now() -> float:
    return to_epoch(now_utc())


def _too_narrow(blocks: BlockSet | None, matrix: UserMatrix) -> bool:
    """Whether a filter keeps so few blocks that scoring their keys exactly beats the approximate index
    (which would have to be asked for ever more proposals to find k that pass)."""
    return blocks is not None and blocks.allow and blocks.pks.size < ANN_MIN_SHARE * matrix.n


def _ts(value: datetime | None) -> float | None:
    return None if value is None else to_epoch(value)


def _dt(value: float | None) -> datetime | None:
    return None if value is None else from_epoch(value)


def _block_filter(
    user: str, conversation_id: str | None, session_id: str | None, now: float
) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) of a listing of the user's live blocks."""
    where = ["u.name = ?", LIVE]
    params: list[object] = [user, now]
    if conversation_id is not None:
        where.append("b.conversation_id = ?")
        params.append(conversation_id)
    if session_id is not None:
        where.append("b.session_id = ?")
        params.append(session_id)
    return " AND ".join(where), params
