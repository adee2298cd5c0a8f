"""The scale-out system of record: PostgreSQL + pgvector, shared by many API and worker processes.

Same contract as the SQLite store: every query carries the user's namespace; one transaction writes a
whole ``add`` (blocks, keys, tsvectors, vectors, cache entries, jobs); ``delete_user`` leaves nothing of
the user. Searches run in the database (exact per-user vector scan, BM25 over tsvector matches), so API
processes keep no per-user state and any number of them can share one database.

Row locks are always taken in the same order (users, jobs, blocks, keys), so concurrent adds, deletes,
claims and completions wait for each other but never deadlock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import (
    ConfigError,
    StoreError,
    StoreNotFoundError,
)
from memlane.core.jobs import EXTRACT_KIND
from memlane.core.model import (
    ExtractionStatus,
)
from memlane.core.store.blocks.postgres_rows import INTEGRITY_CHECKS
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.check import StoreCheck
from memlane.core.store.postgres import ann, citus
from memlane.core.store.postgres import check as pg_check
from memlane.core.store.postgres.adapt import register_vector
from memlane.core.store.postgres.ann import AnnBuilder
from memlane.core.store.postgres.cachewrites import CacheWriter
from memlane.core.store.postgres.calllog import StoreCallLog
from memlane.core.store.postgres.dialect import NOW, Conn
from memlane.core.store.postgres.keys import next_ids
from memlane.core.store.postgres.probe import postgres_reason, probe_write
from memlane.core.store.postgres.schema import migrate, prepare_database, store_exists
from memlane.core.store.postgres.tenant import held_by, user_key
from memlane.core.store.postgres.url import redact
from memlane.core.timefmt import now_utc, to_epoch


def refuse_collision(conn: Conn, user_id: int, user: str) -> None:
    """After an insert of ``user`` that found its id taken: StoreError if another name holds that id (two
    names with one hash, :mod:`memlane.core.store.postgres.tenant`); a row of this very name is fine."""
    row = conn.execute("SELECT name FROM users WHERE id = %s", (user_id,)).fetchone()
    if row is not None and str(row[0]) != user:
        raise held_by(user, user_id, str(row[0]))


log = logging.getLogger(__name__)


# How long the pool keeps retrying a lost connection (with a backoff that doubles from 1 s) before it gives
# up; the next operation then starts a new attempt at once. psycopg_pool's default (5 minutes) lets the
# backoff grow so long that a store came back only minutes after its server did.
RECONNECT_S = 10.0


class PostgresBase:
    """What every room of the PostgreSQL store stands on: the connection pool and its transactions, the user's
    row lock (created on a first write), the Citus placement of the approximate indexes, the embedding cache and
    its background writes, and the store's upkeep (its embedder, checks, probes)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        durability: str = "full",
        pool_min: int = 1,
        pool_max: int = 10,
        timeout_s: float = 30.0,
        create: bool = True,
        ann: AnnSettings | None = None,
        distribute: bool = False,
    ) -> None:
        """``create=False`` opens only an existing store (its tables made by an earlier open):
        StoreNotFoundError, creating nothing, if there is none. ``ann``: when large users are searched
        through a per-user HNSW index (:class:`memlane.core.store.candidates.annsettings.AnnSettings`; by default from
        20,000 keys).

        On a Citus coordinator a new store is distributed when it is first opened
        (:mod:`memlane.core.store.postgres.citus`); one that already holds data only with ``distribute``
        (``memlane shards distribute``), and ``distributed`` then says what was moved."""
        if durability not in ("full", "normal"):
            raise ConfigError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.url = url
        self.schema = schema
        self.durability = durability
        self._where = redact(url) + (f" (schema {schema})" if schema else "")
        self.ann_settings = ann or AnnSettings()
        self.ann = AnnBuilder(self.ann_settings, self._ann_place)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(timeout_s)) as conn:
                if not create and not store_exists(conn, schema):
                    raise StoreNotFoundError(f"no store at {self._where} (no memlane tables there)")
                self.search_path = prepare_database(conn, schema)
                conn.autocommit = False
                migrate(conn)
                self.citus, self.distributed = citus.distribute_on_first_use(conn, with_data=distribute)
                row = conn.execute("SELECT 'vector'::regtype::oid, 'vector[]'::regtype::oid").fetchone()
                assert row is not None
                self.vector_oid, self._vector_array_oid = int(row[0]), int(row[1])
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the store at {self._where}: {exc}") from exc
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=pool_min,
            max_size=max(pool_min, pool_max),
            open=False,
            configure=self._configure,
            # A pooled connection may predate a server restart: test it before lending it out.
            check=ConnectionPool.check_connection,
            timeout=timeout_s,
            reconnect_timeout=RECONNECT_S,
            name="memlane",
        )
        self._cache_writer = CacheWriter(self.put_vectors)
        try:
            self._pool.open(wait=True, timeout=timeout_s)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreError(f"cannot open a connection pool to {self._where}: {exc}") from exc

    def _configure(self, conn: Conn) -> None:
        register_vector(conn, self.vector_oid, self._vector_array_oid)
        conn.autocommit = True
        # Statements psycopg prepares would otherwise switch to a generic plan after five runs, one planned
        # for an average user: a seq scan of every user's rows where a small user needs an index scan.
        conn.execute("SET plan_cache_mode TO force_custom_plan")
        if self.search_path:
            conn.execute(f"SET search_path TO {self.search_path}")
        if self.durability == "normal":
            conn.execute("SET synchronous_commit TO off")
        conn.autocommit = False

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """A database error inside as a StoreError that names the store and the reason."""
        try:
            yield
        except psycopg.Error as exc:
            reason = postgres_reason(exc, default="database error")
            raise StoreError(f"database operation failed on {self._where}: {exc}", reason=reason) from exc

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """One transaction on a pooled connection: committed on success, rolled back on any error."""
        with self._store_errors(), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def autocommit(self) -> Iterator[Conn]:
        """A pooled connection in autocommit mode (for ``CREATE INDEX CONCURRENTLY``), given back as lent."""
        with self.transaction() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                conn.autocommit = False

    @contextmanager
    def dedicated(self) -> Iterator[Conn]:
        """A connection of its own in autocommit mode, set up as the pool's and closed afterwards: for an
        operation that may leave state on its session when it fails (a Citus shard split's replication
        connections), which the pool would otherwise lend on."""
        with self._store_errors(), psycopg.connect(self.url, autocommit=True, connect_timeout=30) as conn:
            self._configure(conn)
            conn.autocommit = True
            yield conn

    @contextmanager
    def single(self) -> Iterator[Conn]:
        """A pooled connection for one statement: in autocommit mode on Citus, where a statement outside a
        transaction block goes to its worker alone (no remote BEGIN and COMMIT: two round trips fewer, and a
        call of a distributed function is handed to the user's node whole); in a transaction on one server."""
        with self.autocommit() if self.citus else self.transaction() as conn:
            yield conn

    def query(self, statement: str, params: Sequence[object] | dict[str, object] = ()) -> list[tuple[Any, ...]]:
        """A read of one statement (:meth:`single`), for the store's own modules and tests."""
        with self.single() as conn:
            return conn.execute(statement, params).fetchall()

    def close(self) -> None:
        """Cancel and wait for the index builds this store runs, write the cache entries handed over, then
        close the pool and every connection in it."""
        self.ann.close()
        self._cache_writer.close()
        self._pool.close()

    def _ann_place(self, user_id: int) -> ann.Place:
        """Where the user's approximate index is: ``key_vectors`` here, or on Citus the shard holding the user,
        on its worker (:func:`memlane.core.store.postgres.citus.ann_place`)."""
        if self.citus:
            return citus.ann_place(self, user_id)
        return ann.Place(self.autocommit, sql.Identifier("key_vectors"), ann.index_name(user_id))

    def _settle_cache(self) -> None:
        """Before a deletion drops cached vectors: the cache entries this process has handed over are
        written, so that none lands after it (:mod:`memlane.core.store.postgres.cachewrites`)."""
        self._cache_writer.flush()

    def bind_embedder(self, model_id: str, dim: int) -> None:
        """Record the embedder on first use; refuse a store whose vectors came from another model."""
        value = json.dumps({"model_id": model_id, "dim": dim})
        with self.transaction() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES ('embedder', %s) ON CONFLICT DO NOTHING", (value,))
            row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        assert row is not None
        bound = json.loads(str(row[0]))
        if bound["model_id"] != model_id or bound["dim"] != dim:
            raise ConfigError(
                f"the store {self._where} holds vectors of {bound['model_id']} ({bound['dim']}-d); "
                f"it cannot be searched with {model_id} ({dim}-d)"
            )

    @staticmethod
    def _lock_user(conn: Conn, user: str, *, create: bool) -> int | None:
        """Lock the user's row for this transaction (creating it if asked); None if there is no such user.

        Writers of one user serialise here; a concurrent delete_user makes the lock wait, then find no
        row: a write then checks the user's tombstone (check_not_deleted) before it creates the
        user anew, never writing rows for a deleted id."""
        user_id = user_key(user)
        for _ in range(5):
            row = conn.execute(
                "SELECT id FROM users WHERE id = %s AND name = %s FOR NO KEY UPDATE", (user_id, user)
            ).fetchone()
            if row is not None or not create:
                return None if row is None else user_id
            inserted = conn.execute(
                # No conflict target: the name is unique too (on one server), and an insert racing another of
                # the same name must wait and then do nothing on either index, not fail on the name's.
                "INSERT INTO users(id, name, created_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (user_id, user, to_epoch(now_utc())),
            ).rowcount
            if not inserted:
                refuse_collision(conn, user_id, user)
        raise StoreError(f"user {user!r} keeps being deleted while written to")

    @staticmethod
    def _user_row(conn: Conn, user: str) -> int | None:
        row = conn.execute("SELECT id FROM users WHERE id = %s AND name = %s", (user_key(user), user)).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _enqueue(conn: Conn, user_id: int, pk: int, attempts: int, queued_at: float) -> None:
        """The block's extraction queued anew: its other jobs go, the block is queued and stamped with the
        caller's clock (``queued_at``, as ``last_queued_at`` reads everywhere); the job's own times are the
        database's, which its lease is compared against."""
        conn.execute("DELETE FROM jobs WHERE user_id = %s AND block_pk = %s", (user_id, pk))
        (job_id,) = next_ids(conn, "jobs_id_seq", 1)
        conn.execute(
            "INSERT INTO jobs(user_id, id, kind, block_pk, status, run_after, max_attempts, created_at, updated_at) "
            f"VALUES (%s, %s, %s, %s, 'queued', {NOW}, %s, {NOW}, {NOW})",
            (user_id, job_id, EXTRACT_KIND, pk, attempts),
        )
        conn.execute(
            "UPDATE blocks SET extraction_status = %s, last_queued_ts = %s WHERE user_id = %s AND pk = %s",
            (ExtractionStatus.QUEUED.value, queued_at, user_id, pk),
        )

    def own_call_log(self) -> StoreCallLog:
        """The LLM call log in this store's ``llm_calls`` table (:mod:`memlane.core.store.postgres.calllog`)."""
        return StoreCallLog(self)

    def recluster(self) -> None:
        """Rewrite the vector and key tables in user order (maintenance, off-peak: it locks them).

        New rows land at the end of the heap, so a user's rows drift apart as users interleave; the
        storage research measured an exact 10k-vector scan at 11 ms clustered against 57 ms interleaved."""
        with self.transaction() as conn:
            conn.execute("CLUSTER key_vectors USING key_vectors_pkey")
            conn.execute("CLUSTER search_keys USING search_keys_pkey")

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """One committed row (:mod:`memlane.core.store.postgres.probe`); StoreError with a reason when the
        database cannot take a write now."""
        try:
            with self._pool.connection(timeout=timeout_s) as conn:
                probe_write(conn, timeout_s)
        except psycopg.Error as exc:
            raise StoreError(f"write probe failed on {self._where}: {exc}", reason=postgres_reason(exc)) from exc

    def integrity_check(self) -> list[str]:
        """Cross-table consistency (keys and vectors in step, counters right, no orphans); empty = healthy.
        Scans whole tables: for tests and diagnostics, not for a hot path."""
        problems = []
        for what, statement in INTEGRITY_CHECKS.items():
            n = int(self.query(statement)[0][0])
            if n:
                problems.append(f"{what}: {n}")
        return problems

    def check(self, *, quick: bool = False) -> StoreCheck:
        """With ``quick``, the pages that failed their checksum; otherwise memlane's cross-table checks and
        amcheck's, where installed (:mod:`memlane.core.store.postgres.check`)."""
        with self.autocommit() as conn:
            found = pg_check.quick_check(conn) if quick else pg_check.full_check(conn)
        return found + citus.ann_report(self) if self.citus and not quick else found

    # -- the embedding cache ---------------------------------------------------------------------------

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        """Cached embeddings of ``model_id`` by content hash (the hashes found). On Citus a cache that cannot
        be read (a worker down) is a miss: the cache is shared by every user, and one user's down worker
        must not stop another's add."""
        if not hashes:
            return {}
        self._settle_cache()  # what this process cached a moment ago is found
        try:
            rows = self.query(
                "SELECT hash, vector FROM embed_cache WHERE model_id = %s AND hash = ANY(%s)", (model_id, list(hashes))
            )
        except StoreError as exc:
            if not self.citus:
                raise
            log.warning("the embedding cache could not be read, embedding anew: %s", exc)
            return {}
        return {str(h): np.frombuffer(bytes(v), dtype=np.float32) for h, v in rows}

    def cache_within(
        self, conn: Conn | None, cache_entries: tuple[str, dict[str, Vectors]] | None
    ) -> Callable[[], None]:
        """Cache an add's (or a completion's) embeddings: on one server inside the caller's transaction; on
        Citus once it has committed (what this returns hands them over; it does nothing otherwise), written
        soon after on a thread of the store's (:mod:`memlane.core.store.postgres.cachewrites`). The cache is
        distributed by content hash, so inside the add it would make every add a transaction across nodes,
        and a down worker would stop the adds of users whose rows are elsewhere."""
        if not cache_entries or not cache_entries[1]:
            return lambda: None
        if not self.citus:
            assert conn is not None
            self.put_vectors_in(conn, *cache_entries)
            return lambda: None
        return lambda: self._cache_writer.submit(*cache_entries)

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None:
        """Cache embeddings by content hash, in a transaction of their own (on Citus one statement of rows,
        which goes to the shard of each hash: for one text one shard, committed there alone)."""
        if not self.citus:
            with self.transaction() as conn:
                self.put_vectors_in(conn, model_id, items)
            return
        ordered = sorted(items)
        rows = sql.SQL(", ").join(sql.SQL("(%s, %s, %s)") for _ in ordered)
        insert = sql.SQL("INSERT INTO embed_cache(model_id, hash, vector) VALUES {} ON CONFLICT DO NOTHING")
        with self.single() as conn:
            conn.execute(
                insert.format(rows),
                [x for h in ordered for x in (model_id, h, np.asarray(items[h], dtype=np.float32).tobytes())],
            )

    @staticmethod
    def put_vectors_in(conn: Conn, model_id: str, items: dict[str, Vectors]) -> None:
        """Cache embeddings inside the caller's transaction (an add's or a completion's)."""
        # Sorted, so two transactions caching overlapping texts take the key locks in one order.
        ordered = sorted(items)
        conn.execute(
            "INSERT INTO embed_cache(model_id, hash, vector) SELECT %s, h, v "
            "FROM unnest(%s::text[], %s::bytea[]) WITH ORDINALITY AS x(h, v, i) ORDER BY i ON CONFLICT DO NOTHING",
            (model_id, ordered, [np.asarray(items[h], dtype=np.float32).tobytes() for h in ordered]),
        )
