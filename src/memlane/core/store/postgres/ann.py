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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from psycopg import sql

from memlane.core.store.annsettings import AnnSettings
from memlane.core.store.postgres.keys import Conn

log = logging.getLogger(__name__)

MAX_EF_SEARCH = 1000  # pgvector's limit


def index_name(user_id: int) -> str:
    return f"key_vectors_ann_u{user_id}"


def index_state(conn: Conn, user_id: int) -> str:
    """``valid`` (the planner uses it), ``building`` (made concurrently right now, or left invalid by an
    interrupted build) or ``none``."""
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (index_name(user_id),)
    ).fetchone()
    if row is None:
        return "none"
    return "valid" if row[0] else "building"


def set_search(conn: Conn, settings: AnnSettings, want: int) -> None:
    """The session settings of one approximate search (for its transaction only): the beam, and an
    iterative scan in distance order, so filters on kind and time that drop rows the graph proposed make
    the scan go on instead of returning fewer rows. Sorts are off: with statistics from before the user
    grew (or none yet), the planner costed an exact sort of "3 rows" below the index scan."""
    ef = min(MAX_EF_SEARCH, max(settings.ef_search, want))
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'strict_order', true), "
        "set_config('enable_sort', 'off', true)",
        (str(ef),),
    )


def drop_user(conn: Conn, user_id: int) -> None:
    """Called by a user's deletion, inside its transaction: drops the user's index (it takes the vector
    table's lock for a moment, as any DROP INDEX does)."""
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index_name(user_id))))


class AnnBuilder:
    """Makes users' indexes, on a thread of its own per user (or inline: ``settings.background=False``)."""

    def __init__(self, settings: AnnSettings, autocommit: Callable[[], AbstractContextManager[Conn]]) -> None:
        self.settings = settings
        self._autocommit = autocommit
        self._busy: set[int] = set()
        self._lock = threading.Lock()
        self.errors: list[str] = []

    def ensure(self, user_id: int) -> None:
        """Start making the user's index unless it is being made by this process."""
        with self._lock:
            if user_id in self._busy:
                return
            self._busy.add(user_id)

        def work() -> None:
            try:
                self.build(user_id)
            except Exception as exc:  # searches stay exact; the failure is kept and logged
                self.errors.append(f"user {user_id}: {exc}")
                log.warning("approximate index of user %s: %s", user_id, exc)
            finally:
                with self._lock:
                    self._busy.discard(user_id)

        if self.settings.background:
            threading.Thread(target=work, name=f"memlane-pg-ann-{user_id}", daemon=True).start()
        else:
            work()

    def build(self, user_id: int) -> None:
        """``CREATE INDEX CONCURRENTLY`` of the user's partial index (an invalid leftover of an interrupted
        build is dropped first); dropped again if the user was deleted meanwhile."""
        name = sql.Identifier(index_name(user_id))
        with self._autocommit() as conn:
            state = index_state(conn, user_id)
            if state == "valid":
                return
            if state == "building":
                # Being made by another process (left alone), or the leftover of an interrupted build
                # (invalid for good: dropped, then made again).
                live = conn.execute(
                    "SELECT 1 FROM pg_stat_progress_create_index WHERE index_relid = to_regclass(%s)",
                    (index_name(user_id),),
                ).fetchone()
                if live is not None:
                    return
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
            dims = conn.execute(
                "SELECT vector_dims(embedding) FROM key_vectors WHERE user_id = %s LIMIT 1", (user_id,)
            ).fetchone()
            if dims is None:
                return  # no keys (any more)
            # The column has no fixed width (the embedder is chosen at run time), which HNSW needs: the
            # index is on the column cast to the user's width, and searches order by the same expression.
            conn.execute(
                sql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON key_vectors USING hnsw "
                    "((embedding::vector({})) vector_ip_ops) WITH (m = {}, ef_construction = {}) WHERE user_id = {}"
                ).format(
                    name,
                    sql.Literal(int(dims[0])),
                    sql.Literal(self.settings.m),
                    sql.Literal(self.settings.ef_construction),
                    sql.Literal(user_id),
                )
            )
            if conn.execute("SELECT 1 FROM users WHERE id = %s", (user_id,)).fetchone() is None:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))


def indexes(conn: Conn) -> Iterator[tuple[str, bool]]:
    """The store's per-user indexes (name, valid), for diagnostics."""
    for name, valid in conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = to_regclass('key_vectors') AND c.relname LIKE 'key\\_vectors\\_ann\\_u%%'"
    ).fetchall():
        yield str(name), bool(valid)
