"""Approximate vector search for large users of the PostgreSQL store: one partial pgvector HNSW index per
user (``key_vectors_ann_u<id> ... WHERE user_id = <id>``), made once the user holds
``AnnSettings.threshold`` keys.

Why partial indexes (docs/postgres.md, "Approximate search for large users", has the measurements): a
search names one user, and a partial index holds that user's keys only, so its graph answers for them
with no filter; the planner picks it because the query's ``user_id = <id>`` (planned per call:
``plan_cache_mode = force_custom_plan``) implies the index's predicate. Small users' writes pay nothing
(their rows match no index's predicate); a global HNSW index would make every write pay the graph's
insertion, and with a user filter it returned almost nothing for a small user (0.002 recall in the
storage research) unless scanned iteratively through most of the graph.

PostgreSQL keeps the index in step with every insert and delete in the writing transaction, so there is
no watermark to keep: a search sees exactly the committed keys. The index is made with
``CREATE INDEX CONCURRENTLY`` (writers of every user go on meanwhile; an index still being made is not
valid and the planner does not use it), and dropped in the user's deletion (:func:`drop_user`).

On Citus (docs/scaling.md, "Large users' indexes on Citus") the index is on the one shard of ``key_vectors``
that holds the user, made through a connection to that shard's worker and named with the shard
(``key_vectors_ann_u<id>_<shard>``), so it exists only where the user's rows are, and a search there
(:mod:`memlane.core.store.postgres.delegated`) finds it by that name. A shard moved or split is made anew
without it: the next search finds none and starts a build on the new shard, searching exactly meanwhile.

A build runs on a thread of its own (``AnnSettings.background``), started by a search that finds the index
missing (``AnnSettings.build``), or in the caller's thread (:meth:`AnnBuilder.build_now`, ``memlane index
build``). Closing the store, or the interpreter's exit, cancels the ``CREATE INDEX`` running on the server
(psycopg's cancel request), drops what it left and waits for the thread: a process never ends with a build
half-way on its connection, which would leave the invalid index to the next build.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import psycopg
from psycopg import sql

from memlane.core.errors import StoreError
from memlane.core.store.candidates.annbuilds import UserBuilds
from memlane.core.store.candidates.annsettings import AnnSettings, IndexStatus
from memlane.core.store.postgres.dialect import Conn

log = logging.getLogger(__name__)

MAX_EF_SEARCH = 1000  # pgvector's limit
SCAN_TUPLES = 20_000  # keys an unfiltered search's iterative scan may walk (pgvector's default)


def index_name(user_id: int) -> str:
    return f"key_vectors_ann_u{user_id}"


@dataclass(frozen=True)
class Place:
    """Where a user's index is made and read: a connection to that server in autocommit mode (``connect``),
    the table it indexes and its name. On one server: the store's own connection, ``key_vectors``,
    :func:`index_name`; on Citus, the shard of ``key_vectors`` that holds the user, on its worker
    (:func:`memlane.core.store.postgres.citus.ann_place`)."""

    connect: Callable[[], AbstractContextManager[Conn]]
    table: sql.Composable
    index: str


def index_state(conn: Conn, name: str) -> str:
    """``valid`` (the planner uses it), ``building`` (made concurrently right now, or left invalid by an
    interrupted build) or ``none``, of the index ``name``."""
    row = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (name,)).fetchone()
    if row is None:
        return "none"
    return "valid" if row[0] else "building"


def being_made(conn: Conn, name: str) -> bool:
    """Whether a ``CREATE INDEX`` of the index ``name`` runs right now (in any process)."""
    live = conn.execute(
        "SELECT 1 FROM pg_stat_progress_create_index WHERE index_relid = to_regclass(%s)", (name,)
    ).fetchone()
    return live is not None


def status(conn: Conn, settings: AnnSettings, name: str, user: str, keys: int) -> IndexStatus:
    """Where the user's index ``name`` stands (``memlane index status``): ``ready``, ``building``,
    ``invalid`` (left by an interrupted build; the next build drops it and makes it again) or ``none``."""
    state = index_state(conn, name)
    if state == "building" and not being_made(conn, name):
        state = "invalid"
    shown = {"valid": "ready"}.get(state, state)
    return IndexStatus(user, keys, settings.applies(keys), shown, keys if shown == "ready" else 0)


def set_search(conn: Conn, settings: AnnSettings, want: int, max_scan: int | None = None) -> None:
    """The session settings of one approximate search (for its transaction only): :func:`search_config`."""
    conn.execute(f"SELECT {search_config(settings, want, max_scan)}")


def search_config(settings: AnnSettings, want: int, max_scan: int | None = None) -> str:
    """The ``set_config`` calls (a select list) of one approximate search, for its transaction only: the
    beam, and an iterative scan in distance order, so filters that drop rows the graph proposed make the
    scan go on instead of returning fewer rows (at most ``max_scan`` rows in all; None: pgvector's default).
    Sorts are off: with statistics from before the user grew (or none yet), the planner costed an exact
    sort of "3 rows" below the index scan."""
    ef = min(MAX_EF_SEARCH, max(settings.ef_search, want))
    scan = SCAN_TUPLES if max_scan is None else max(1, max_scan)
    return (
        f"set_config('hnsw.ef_search', '{int(ef)}', true), set_config('hnsw.iterative_scan', 'strict_order', true), "
        f"set_config('enable_sort', 'off', true), set_config('hnsw.max_scan_tuples', '{int(scan)}', true)"
    )


def drop_user(conn: Conn, user_id: int) -> None:
    """Called by a user's deletion, inside its transaction: drops the user's index (it takes the vector
    table's lock for a moment, as any DROP INDEX does)."""
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index_name(user_id))))


class AnnBuilder(UserBuilds):
    """Makes users' indexes, on a thread of its own per user (or inline: ``settings.background=False``;
    never from a search: ``settings.build=False``)."""

    thread_prefix = "memlane-pg-ann"

    def __init__(self, settings: AnnSettings, place: Callable[[int], Place]) -> None:
        super().__init__(settings)
        self._place = place
        self._running: dict[int, Conn] = {}  # user id -> the connection its CREATE INDEX runs on
        _LIVE.add(self)

    def close(self) -> None:
        """Cancel the builds running in this process and wait for them; searches after this start none."""
        self._stop.set()
        with self._lock:
            running = [t for t in self._threads.values() if t is not threading.current_thread()]
            conns = list(self._running.values())
        for conn in conns:
            try:
                conn.cancel_safe(timeout=5.0)
            except psycopg.Error as exc:  # the server is gone: the build is gone with it
                log.info("cancelling an index build: %s", exc)
        for thread in running:
            thread.join()

    def ensure(self, user_id: int) -> None:
        """Start making the user's index unless it is being made by this process (or searches start no
        builds here: ``settings.build=False``)."""
        if self.settings.build:
            self._start(user_id, lambda: self.build(user_id))

    def build_now(self, user_id: int) -> None:
        """Make the user's index in this thread (``memlane index build``), after any build of the user this
        process runs in the background."""
        with self._lock:
            running = self._threads.get(user_id)
        if running is not None:
            running.join()
        self.build(user_id)

    def build(self, user_id: int) -> None:
        """``CREATE INDEX CONCURRENTLY`` of the user's partial index where it belongs (:class:`Place`; an
        invalid leftover of an interrupted build is dropped first); dropped again if the user was deleted
        meanwhile, or if :meth:`close` cancelled it."""
        place = self._place(user_id)
        name = sql.Identifier(place.index)
        with place.connect() as conn:
            if self._stop.is_set():
                raise StoreError("the store was closed: no index is built")
            state = index_state(conn, place.index)
            if state == "valid":
                return
            if state == "building":
                # Being made by another process (left alone), or the leftover of an interrupted build
                # (invalid for good: dropped, then made again).
                if being_made(conn, place.index):
                    return
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
            dims = conn.execute(
                sql.SQL("SELECT vector_dims(embedding) FROM {} WHERE user_id = %s LIMIT 1").format(place.table),
                (user_id,),
            ).fetchone()
            if dims is None:
                return  # no keys (any more)
            # The column has no fixed width (the embedder is chosen at run time), which HNSW needs: the
            # index is on the column cast to the user's width, and searches order by the same expression.
            create = sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING hnsw "
                "((embedding::vector({})) vector_ip_ops) WITH (m = {}, ef_construction = {}) WHERE user_id = {}"
            ).format(
                name,
                place.table,
                sql.Literal(int(dims[0])),
                sql.Literal(self.settings.m),
                sql.Literal(self.settings.ef_construction),
                sql.Literal(user_id),
            )
            self._create(conn, user_id, create, name)
            if conn.execute("SELECT 1 FROM users WHERE id = %s", (user_id,)).fetchone() is None:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))

    def _create(self, conn: Conn, user_id: int, create: sql.Composed, name: sql.Identifier) -> None:
        """Run the ``CREATE INDEX`` where :meth:`close` can cancel it; a cancelled one leaves an invalid
        index, dropped here (within a few seconds, else by the next build)."""
        with self._lock:
            if self._stop.is_set():
                raise StoreError("the store was closed: no index is built")
            self._running[user_id] = conn
        try:
            conn.execute(create)
        except psycopg.errors.QueryCanceled:
            with contextlib.suppress(psycopg.Error):  # best effort: else the next build drops it
                conn.execute("SET statement_timeout = 5000")
                try:
                    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
                finally:
                    conn.execute("RESET statement_timeout")
            raise
        finally:
            with self._lock:
                self._running.pop(user_id, None)


_LIVE: weakref.WeakSet[AnnBuilder] = weakref.WeakSet()


@atexit.register
def _stop_builds() -> None:
    """At interpreter exit: cancel and wait for every build (see the module's docstring)."""
    for builder in list(_LIVE):
        builder.close()


def indexes(conn: Conn) -> Iterator[tuple[str, bool]]:
    """The store's per-user indexes (name, valid), for diagnostics."""
    for name, valid in conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = to_regclass('key_vectors') AND c.relname LIKE 'key\\_vectors\\_ann\\_u%%'"
    ).fetchall():
        yield str(name), bool(valid)
