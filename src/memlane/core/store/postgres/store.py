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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import ConfigError, NotFoundError, StoreError, StoreNotFoundError, ValidationError
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
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.annsettings import EXACT, AnnSettings, IndexStatus
from memlane.core.store.check import StoreCheck
from memlane.core.store.deletions import name_sha256
from memlane.core.store.gather import Gather, Gathered, gather_stepwise
from memlane.core.store.postgres import accounts, ann, citus, delegated, expiry, prompts, search, sessions
from memlane.core.store.postgres import check as pg_check
from memlane.core.store.postgres.adapt import register_vector
from memlane.core.store.postgres.ann import AnnBuilder
from memlane.core.store.postgres.blockrows import COLUMNS, LIVE, filter_sql, now_epoch, restricts, sides_json, to_block
from memlane.core.store.postgres.blocks import (
    INTEGRITY_CHECKS,
    add_session_terms,
    copy_blocks,
    last_exchange,
    take_session_terms,
)
from memlane.core.store.postgres.cachewrites import CacheWriter
from memlane.core.store.postgres.calllog import StoreCallLog
from memlane.core.store.postgres.keys import Conn, bump_user, delete_block_keys, insert_keys, next_ids
from memlane.core.store.postgres.probe import postgres_reason, probe_write
from memlane.core.store.postgres.queue import PostgresJobQueue
from memlane.core.store.postgres.schema import migrate, prepare_database, store_exists
from memlane.core.store.postgres.tenant import held_by, user_key
from memlane.core.store.postgres.url import redact
from memlane.core.store.rows import continue_sessions
from memlane.core.timefmt import now_utc, to_epoch

log = logging.getLogger(__name__)
NOW = "extract(epoch FROM now())"  # the database's clock: leases compare times written by many machines
# How long the pool keeps retrying a lost connection (with a backoff that doubles from 1 s) before it gives
# up; the next operation then starts a new attempt at once. psycopg_pool's default (5 minutes) lets the
# backoff grow so long that a store came back only minutes after its server did.
RECONNECT_S = 10.0


class PostgresStore:
    """PostgreSQL store (``postgresql://user:password@host:port/db``). Thread-safe: a pool lends each
    operation its own connection.

    ``schema`` keeps the store in its own PostgreSQL schema (created if missing), so one database can hold
    several stores; by default the tables go where the connection's ``search_path`` points.
    ``durability="normal"`` turns off ``synchronous_commit``: faster commits, but a server crash may lose
    the last acknowledged ones (never corrupt anything).
    """

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
        through a per-user HNSW index (:class:`memlane.core.store.annsettings.AnnSettings`; by default from
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

    # -- connections and transactions -------------------------------------------------------------------

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
    def transaction(self) -> Iterator[Conn]:
        """One transaction on a pooled connection: committed on success, rolled back on any error."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            reason = postgres_reason(exc, default="database error")
            raise StoreError(f"database operation failed on {self._where}: {exc}", reason=reason) from exc

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
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=30) as conn:
                self._configure(conn)
                conn.autocommit = True
                yield conn
        except psycopg.Error as exc:
            reason = postgres_reason(exc, default="database error")
            raise StoreError(f"database operation failed on {self._where}: {exc}", reason=reason) from exc

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

    # -- settings bound to the database ------------------------------------------------------------------

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

    # -- users -------------------------------------------------------------------------------------------

    @staticmethod
    def _lock_user(conn: Conn, user: str, *, create: bool) -> int | None:
        """Lock the user's row for this transaction (creating it if asked); None if there is no such user.

        Writers of one user serialise here; a concurrent delete_user makes the lock wait, then find no
        row: a write then checks the user's tombstone (accounts.check_not_deleted) before it creates the
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
                _refuse_collision(conn, user_id, user)
        raise StoreError(f"user {user!r} keeps being deleted while written to")

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        """Create a namespace with its display name and metadata; returns False (changing nothing) if it
        already existed."""
        user_id = user_key(user)
        with self.transaction() as conn:
            row = conn.execute(
                "INSERT INTO users(id, name, created_at, display_name, metadata) VALUES (%s, %s, %s, %s, %s::jsonb) "
                "ON CONFLICT DO NOTHING RETURNING id",  # either unique index: see _lock_user
                (user_id, user, to_epoch(now_utc()), display_name or None, json.dumps(dict(metadata or {}))),
            ).fetchone()
            if row is None:
                _refuse_collision(conn, user_id, user)
        return row is not None

    def list_users(self) -> list[UserInfo]:
        """Every namespace with its (live) block count, by name."""
        with self.transaction() as conn:
            rows = conn.execute(
                "SELECT id, name, created_at, display_name, metadata FROM users ORDER BY name"
            ).fetchall()
            return sessions.user_infos(conn, rows, now_epoch())

    def get_user(self, user: str) -> UserInfo:
        with self.transaction() as conn:
            return sessions.get_user(conn, user, now_epoch())

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            sessions.update_user(conn, user_id, display_name=display_name, metadata=metadata)
            return sessions.get_user(conn, user, now_epoch())

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
        with self.transaction() as conn:
            return sessions.find_users(
                conn,
                name=name,
                metadata=metadata,
                limit=limit,
                offset=offset,
                now=now_epoch(),
                contains=contains,
                metadata_text=metadata_text,
            )

    # -- sessions (memlane.core.store.postgres.sessions) ----------------------------------------------------

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
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            return sessions.create_session(
                conn, user, user_id, session_id, conversation_id=conversation_id, started_at=started_at,
                annotations=annotations, metadata=metadata, default_ttl_s=default_ttl_s, exist_ok=exist_ok, now=now,
            )  # fmt: skip

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        with self.transaction() as conn:
            return sessions.get_session(conn, user, self._user_row(conn, user), session_id, now)

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        with self.transaction() as conn:
            return sessions.list_sessions(conn, user, self._user_row(conn, user), limit, offset, now)

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
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            return sessions.update_session(
                conn, user, user_id, session_id, annotations=annotations, metadata=metadata,
                default_ttl_s=default_ttl_s, now=now,
            )  # fmt: skip

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            return sessions.end_session(conn, user, user_id, session_id, at, now)

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        """The session and its blocks (expired ones too), deleted as completely as by delete_block, in one
        transaction; the blocks as they were."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None or sessions.session_row(conn, user_id, session_id) is None:
                raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = %s AND session_id = %s", (user_id, session_id)
                ).fetchall()
            ]
            blocks = expiry.blocks_by_pk(conn, user_id, pks)
            expiry.delete_blocks(conn, user_id, pks)
            conn.execute("DELETE FROM sessions WHERE user_id = %s AND session_id = %s", (user_id, session_id))
        return blocks

    def delete_blocks(self, user: str, filters: Filters) -> list[MemoryBlock]:
        """The user's blocks that pass ``filters``, deleted as completely as by delete_block in one
        transaction that holds the user's row lock; the blocks as they were."""
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                return []
            params: dict[str, object] = {"u": user_id}
            where = f"b.user_id = %(u)s{filter_sql(filters, params)}"
            pks = [int(r[0]) for r in conn.execute(f"SELECT b.pk FROM blocks b WHERE {where}", params).fetchall()]
            blocks = expiry.blocks_by_pk(conn, user_id, pks)
            expiry.delete_blocks(conn, user_id, pks)
        return blocks

    @staticmethod
    def _user_row(conn: Conn, user: str) -> int | None:
        row = conn.execute("SELECT id FROM users WHERE id = %s AND name = %s", (user_key(user), user)).fetchone()
        return None if row is None else int(row[0])

    # -- updates, TTLs, the query-less browse ---------------------------------------------------------------

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
        """Replace the block of the same id in one transaction (see the protocol): with new content its old
        keys (message, summary, facts) go with their vectors (and so their ANN entries: the index follows
        the table in the same transaction), tsvectors, keyword statistics and the sessions' people's words,
        and the new message key comes in."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            row = None
            if user_id is not None:
                row = conn.execute(
                    f"SELECT b.pk, b.session_id FROM blocks b WHERE b.user_id = %(u)s AND b.id = %(id)s AND {LIVE}",
                    {"u": user_id, "id": block.id, "now": now},
                ).fetchone()
            if user_id is None or row is None:
                raise NotFoundError(f"block {block.id!r} not found for user {user!r}")
            pk, session_id = int(row[0]), str(row[1])
            session = sessions.open_session(conn, user, user_id, session_id)
            status = block.extraction_status.value
            if vectors is not None:
                conn.execute("DELETE FROM jobs WHERE user_id = %s AND block_pk = %s", (user_id, pk))
                expiry.drop_cached(conn, user_id, [pk])
                removed = delete_block_keys(conn, user_id, [pk], keep_messages=False)
                take_session_terms(conn, user_id, [pk])
            conn.execute(
                "UPDATE blocks SET message = %s, summary = %s, contexts = %s::jsonb, content_hash = %s, "
                "extraction_status = %s, extraction_prompt = %s, annotations = %s::jsonb, kind = %s, "
                "sides = %s::jsonb, ttl_s = %s, updated_ts = %s, prompt_id = %s, prompt_version = %s "
                "WHERE user_id = %s AND pk = %s",
                (
                    block.message, block.summary, json.dumps(list(block.contexts)), block.content_hash, status,
                    block.extraction_prompt, json.dumps(block.annotations, sort_keys=True), block.kind.value,
                    sides_json(block), block.ttl_s, now, block.prompt_id, block.prompt_version, user_id, pk,
                ),
            )  # fmt: skip
            if vectors is not None:
                add_session_terms(conn, user_id, [pk])
                key = (pk, "message", block.message, block.content_hash, to_epoch(block.event_time))
                added = insert_keys(conn, self.vector_oid, user_id, [key], vectors)
                bump_user(conn, user_id, added[0] - removed[0], added[1] - removed[1])
            if reset_ttl:
                expires = sessions.expiry(
                    now, block.ttl_s, None if session[6] is None else int(session[6]), default_ttl_s
                )
                conn.execute("UPDATE blocks SET expires_ts = %s WHERE user_id = %s AND pk = %s", (expires, user_id, pk))
            if enqueue_attempts:
                self._enqueue(conn, user_id, pk, enqueue_attempts)
            (stored,) = expiry.blocks_by_pk(conn, user_id, [pk])
        return stored

    @staticmethod
    def _enqueue(conn: Conn, user_id: int, pk: int, attempts: int) -> None:
        """The block's extraction queued anew: its other jobs go, the block is queued and stamped."""
        conn.execute("DELETE FROM jobs WHERE user_id = %s AND block_pk = %s", (user_id, pk))
        (job_id,) = next_ids(conn, "jobs_id_seq", 1)
        conn.execute(
            "INSERT INTO jobs(user_id, id, kind, block_pk, status, run_after, max_attempts, created_at, updated_at) "
            f"VALUES (%s, %s, %s, %s, 'queued', {NOW}, %s, {NOW}, {NOW})",
            (user_id, job_id, EXTRACT_KIND, pk, attempts),
        )
        conn.execute(
            f"UPDATE blocks SET extraction_status = %s, last_queued_ts = {NOW} WHERE user_id = %s AND pk = %s",
            (ExtractionStatus.QUEUED.value, user_id, pk),
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
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            params: dict[str, object] = {"u": user_id, "now": now, "ttl": ttl_s}
            where = f"b.user_id = %(u)s AND {LIVE}"
            if session_id is not None:
                if sessions.session_row(conn, user_id, session_id) is None:
                    raise NotFoundError(f"session {session_id!r} not found for user {user!r}")
                where += " AND b.session_id = %(s)s"
                params["s"] = session_id
            if block_ids is not None:
                where += " AND b.id = ANY(%(ids)s::text[])"
                params["ids"] = list(block_ids)
            return int(
                conn.execute(
                    "UPDATE blocks b SET ttl_s = %(ttl)s, "
                    f"expires_ts = CASE WHEN %(ttl)s = 0 THEN NULL ELSE %(now)s + %(ttl)s END WHERE {where}",
                    params,
                ).rowcount
            )

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
        column = {"ingested": "b.ingest_ts", "event": "b.event_ts"}.get(order)
        if column is None:
            raise ValidationError("must be 'ingested' or 'event'", where="order")
        with self.transaction() as conn:
            user_id = self._user_row(conn, user)
            if user_id is None:
                return Page([], 0, limit, offset)
            params: dict[str, object] = {"u": user_id, "now": now}
            where = f"b.user_id = %(u)s AND {LIVE}{filter_sql(filters, params)}"
            if after is not None:
                where += " AND b.event_ts >= %(after)s"
                params["after"] = after
            if before is not None:
                where += " AND b.event_ts < %(before)s"
                params["before"] = before
            total = conn.execute(f"SELECT count(*) FROM blocks b WHERE {where}", params).fetchone()
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE {where} "
                f"ORDER BY {column} DESC, b.id DESC LIMIT %(limit)s OFFSET %(offset)s",
                {**params, "limit": limit, "offset": offset},
            ).fetchall()
        return Page([to_block(r) for r in rows], int(total[0]) if total else 0, limit, offset)

    def expired_users(self, now: float) -> list[str]:
        """Users with a block whose TTL ran out (through the partial index of blocks with an expiry)."""
        rows = self.query(
            "SELECT u.name FROM users u WHERE u.id IN (SELECT DISTINCT user_id FROM blocks WHERE expires_ts <= %s) "
            "ORDER BY u.name",
            (now,),
        )
        return [str(r[0]) for r in rows]

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                return []
            pks = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pk FROM blocks WHERE user_id = %s AND expires_ts <= %s ORDER BY expires_ts, pk LIMIT %s",
                    (user_id, now, limit),
                ).fetchall()
            ]
            blocks = expiry.blocks_by_pk(conn, user_id, pks)
            if not dry_run:
                expiry.delete_blocks(conn, user_id, pks)
        return blocks

    def requeue_block(self, user: str, block_id: str, *, max_attempts: int, now: float) -> MemoryBlock:
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            row = None
            if user_id is not None:
                row = conn.execute(
                    "SELECT b.pk, b.extraction_status FROM blocks b "
                    f"WHERE b.user_id = %(u)s AND b.id = %(id)s AND {LIVE}",
                    {"u": user_id, "id": block_id, "now": now},
                ).fetchone()
            if user_id is None or row is None:
                raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
            if row[1] != ExtractionStatus.FAILED.value:
                raise ValidationError(
                    f"block {block_id!r} is {row[1]}: only a block whose extraction failed is queued again",
                    where="block_id",
                )
            self._enqueue(conn, user_id, int(row[0]), max_attempts)
            (block,) = expiry.blocks_by_pk(conn, user_id, [int(row[0])])
        return block

    # -- the prompt registry (memlane.core.store.postgres.prompts) ------------------------------------------

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        with self.transaction() as conn:
            return prompts.create(conn, prompt_id, text, description=description, annotations=annotations, now=now)

    def get_prompt(self, prompt_id: str) -> Prompt:
        with self.transaction() as conn:
            return prompts.get(conn, prompt_id)

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        with self.transaction() as conn:
            return prompts.version(conn, prompt_id, version)

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        with self.transaction() as conn:
            return prompts.list_heads(conn, limit=limit, offset=offset, include_archived=include_archived)

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        with self.transaction() as conn:
            return prompts.list_versions(conn, prompt_id, limit=limit, offset=offset)

    def update_prompt(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
        now: float,
    ) -> Prompt:
        with self.transaction() as conn:
            return prompts.update(conn, prompt_id, text=text, description=description, annotations=annotations, now=now)

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        with self.transaction() as conn:
            return prompts.archive(conn, prompt_id, version, now)

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        with self.transaction() as conn:
            return prompts.purge(conn, prompt_id, version)

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

        ``cache_entries`` (model id, {content hash: vector}) go to the embedding cache in the same
        transaction; ``enqueue_attempts`` > 0 enqueues one extraction job per block (the outbox), allowed
        that many attempts. Returns the job ids. ``epoch``: the deletion epoch the add read when it began;
        UserDeletedError (nothing written) if the user was deleted since."""
        if len(blocks) != len(vectors):
            raise StoreError(f"{len(blocks)} blocks but {len(vectors)} vectors")
        if self.citus:
            try:
                with self.autocommit() as conn:
                    job_ids = delegated.write(
                        conn, user, user_key(user), blocks, vectors, since=epoch, name_sha256=name_sha256(user),
                        now=to_epoch(now_utc()), attempts=enqueue_attempts, default_ttl_s=default_ttl_s,
                    )  # fmt: skip
            except delegated.Elsewhere:
                pass  # the user's shard moved as the call went out: written through the coordinator instead
            else:
                self.cache_within(None, cache_entries)()
                return job_ids
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=True)
            assert user_id is not None
            accounts.check_not_deleted(conn, user, epoch)  # after the lock: it sees a deletion it waited for
            pks = next_ids(conn, "blocks_pk_seq", len(blocks))
            # Under the user's row lock: no other write of the user comes between this read and the COPY.
            blocks = continue_sessions(blocks, lambda c, s: last_exchange(conn, user_id, c, s))
            ttls = sessions.ensure_sessions(conn, user, user_id, blocks, to_epoch(now_utc()))
            expires = [
                sessions.expiry(to_epoch(b.ingest_time), b.ttl_s, ttls.get(b.session_id), default_ttl_s) for b in blocks
            ]
            queued = conn.execute(f"SELECT {NOW}").fetchone() if enqueue_attempts else None
            copy_blocks(conn, user_id, pks, blocks, expires, None if queued is None else float(queued[0]))
            add_session_terms(conn, user_id, pks)
            job_ids = next_ids(conn, "jobs_id_seq", len(pks) if enqueue_attempts else 0)
            if job_ids:
                conn.execute(
                    "INSERT INTO jobs(user_id, id, kind, block_pk, status, run_after, max_attempts, created_at, "
                    f"updated_at) SELECT %s, j, %s, b, 'queued', {NOW}, %s, {NOW}, {NOW} "
                    "FROM unnest(%s::bigint[], %s::bigint[]) AS x(j, b)",
                    (user_id, EXTRACT_KIND, enqueue_attempts, job_ids, pks),
                )
            keys = [
                (pk, "message", b.message, b.content_hash, to_epoch(b.event_time))
                for pk, b in zip(pks, blocks, strict=True)
            ]
            added = insert_keys(conn, self.vector_oid, user_id, keys, vectors)
            later = self.cache_within(conn, cache_entries)
            bump_user(conn, user_id, *added)
        later()
        return job_ids

    def job_queue(self) -> PostgresJobQueue:
        """The extraction queue kept in this store's database."""
        return PostgresJobQueue(self)

    def delete_block(self, user: str, block_id: str) -> MemoryBlock:
        """Delete one block with its keys, vectors and jobs, and return it as it was; NotFoundError if it is
        not the user's."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            row = conn.execute(
                "SELECT pk FROM blocks WHERE user_id = %s AND id = %s", (-1 if user_id is None else user_id, block_id)
            ).fetchone()
            if user_id is None or row is None:
                raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
            (block,) = expiry.blocks_by_pk(conn, user_id, [int(row[0])])
            expiry.delete_blocks(conn, user_id, [int(row[0])])
        return block

    # -- retention (memlane.core.retention) ----------------------------------------------------------------

    def retention_policies(self) -> Policies:
        with self.transaction() as conn:
            return expiry.read_policies(conn)

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        with self.transaction() as conn:
            user_id = None if user is None else self._lock_user(conn, user, create=False)
            expiry.write_policy(conn, user_id, user, policy)

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        """The user's blocks older than ``before`` (event time) or beyond the ``keep`` newest, at most
        ``limit`` of them, decided and (unless ``dry_run``) deleted in one transaction that holds the user's
        row lock: an add of the same user commits before (and is counted among the newest) or after (and
        was not seen); an unknown user has none."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                return Expired(0, [], 0)
            pks = expiry.expired_pks(conn, user_id, before, keep, limit)
            blocks = [] if dry_run else expiry.blocks_by_pk(conn, user_id, pks)
            if not dry_run:
                expiry.delete_blocks(conn, user_id, pks)
            remaining = expiry.count_blocks(conn, user_id) - (len(pks) if dry_run else 0)
        return Expired(len(pks), blocks, remaining)

    def delete_user(self, user: str) -> DeletedUser:
        """Remove the user and everything of theirs (blocks, search keys, vectors, tsvectors, jobs, cached
        vectors no other user shares, API keys), and record the deletion so that no add in flight brings
        them back. NotFoundError if unknown."""
        self._settle_cache()
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=False)
            if user_id is None:
                raise NotFoundError(f"user {user!r} not found")
            conn.execute("DELETE FROM jobs WHERE user_id = %s", (user_id,))
            expiry.drop_cached(conn, user_id, None)
            conn.execute("DELETE FROM key_vectors WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM search_keys WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM session_terms WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM session_lengths WHERE user_id = %s", (user_id,))
            n = conn.execute("DELETE FROM blocks WHERE user_id = %s", (user_id,)).rowcount
            conn.execute("DELETE FROM sessions WHERE user_id = %s", (user_id,))
            keys = conn.execute("DELETE FROM api_keys WHERE user_id = %s", (user_id,)).rowcount
            conn.execute("DELETE FROM retention_policies WHERE user_id = %s", (user_id,))
            conn.execute("DELETE FROM llm_calls WHERE user_id = %s", (user_id,))
            row = conn.execute("DELETE FROM users WHERE id = %s RETURNING n_keys", (user_id,)).fetchone()
            ann.drop_user(conn, user_id)
            accounts.record_deletion(conn, user)
        if self.citus and row is not None and self.ann_settings.applies(int(row[0])):
            citus.drop_ann(self, user_id)  # a worker's index is out of the deletion's reach
        return DeletedUser(blocks=int(n), keys=int(keys))

    def deletion_epoch(self) -> int:
        """The store's deletion epoch: what an add reads before its slow part (core/store/deletions.py)."""
        with self.single() as conn:
            return accounts.deletion_epoch(conn)

    def own_call_log(self) -> StoreCallLog:
        """The LLM call log in this store's ``llm_calls`` table (:mod:`memlane.core.store.postgres.calllog`)."""
        return StoreCallLog(self)

    # -- API keys (memlane.core.apikeys makes and checks them) ----------------------------------------------

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        with self.transaction() as conn:
            return accounts.add_key(conn, user, key_id, secret_sha256, label, created_at, role)

    def get_api_key(self, key_id: str) -> StoredKey | None:
        with self.transaction() as conn:
            return accounts.get_key(conn, key_id)

    def list_api_keys(self, user: str) -> list[KeyRecord]:
        with self.transaction() as conn:
            return accounts.list_keys(conn, user)

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        with self.transaction() as conn:
            return accounts.revoke_key(conn, user, key_id)

    def recluster(self) -> None:
        """Rewrite the vector and key tables in user order (maintenance, off-peak: it locks them).

        New rows land at the end of the heap, so a user's rows drift apart as users interleave; the
        storage research measured an exact 10k-vector scan at 11 ms clustered against 57 ms interleaved."""
        with self.transaction() as conn:
            conn.execute("CLUSTER key_vectors USING key_vectors_pkey")
            conn.execute("CLUSTER search_keys USING search_keys_pkey")

    # -- reads -------------------------------------------------------------------------------------------

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        """One block of ``user``; NotFoundError if it does not exist or is someone else's."""
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id "
            f"WHERE u.id = %(uid)s AND b.user_id = %(uid)s AND u.name = %(user)s AND b.id = %(id)s AND {LIVE}",
            {"user": user, "uid": user_key(user), "id": block_id, "now": now_epoch()},
        )
        if not rows:
            raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
        return to_block(rows[0])

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        # The block by its id, then its exchange through blocks_user_session (user, conversation, session,
        # exchange index): a few rows, whatever the user's size.
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks x JOIN users u ON u.id = x.user_id JOIN blocks b "
            "ON b.user_id = x.user_id AND b.conversation_id = x.conversation_id AND b.session_id = x.session_id "
            "AND b.exchange_index = x.exchange_index "
            f"WHERE x.id = %(id)s AND u.id = %(uid)s AND x.user_id = %(uid)s AND u.name = %(user)s "
            f"AND (x.expires_ts IS NULL OR x.expires_ts > %(now)s) "
            f"AND {LIVE} AND b.ingest_ts = x.ingest_ts AND b.content_hash = x.content_hash "
            "ORDER BY b.id <> x.id, b.perspective, b.id",
            {"user": user, "uid": user_key(user), "id": block_id, "now": now_epoch()},
        )
        if not rows:
            raise NotFoundError(f"block {block_id!r} not found for user {user!r}")
        return [to_block(r) for r in rows]

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
        where, params = _block_filter(user, conversation_id, session_id)
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE {where} "
            "ORDER BY b.event_ts, b.conversation_id, b.session_id, b.exchange_index, b.pk LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        return [to_block(r) for r in rows]

    def count_blocks(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """How many blocks :meth:`list_blocks` pages through."""
        where, params = _block_filter(user, conversation_id, session_id)
        rows = self.query(f"SELECT count(*) FROM blocks b JOIN users u ON u.id = b.user_id WHERE {where}", params)
        return int(rows[0][0])

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]:
        """Blocks by internal reference, only those of ``user``."""
        if not refs:
            return {}
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id "
            f"WHERE u.id = %(uid)s AND b.user_id = %(uid)s AND u.name = %(user)s AND b.pk = ANY(%(refs)s) AND {LIVE}",
            {"user": user, "uid": user_key(user), "refs": list(refs), "now": now_epoch()},
        )
        return {int(r[0]): to_block(r) for r in rows}

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time) of the user's blocks by reference, without their text."""
        if not refs:
            return {}
        rows = self.query(
            "SELECT b.pk, b.session_id, b.exchange_index, b.event_ts FROM blocks b JOIN users u ON u.id = b.user_id "
            f"WHERE u.id = %(uid)s AND b.user_id = %(uid)s AND u.name = %(user)s AND b.pk = ANY(%(refs)s) AND {LIVE}",
            {"user": user, "uid": user_key(user), "refs": list(refs), "now": now_epoch()},
        )
        return {int(pk): (str(session), int(exchange), float(ts)) for pk, session, exchange, ts in rows}

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
        """Cosine top-k blocks of ``user`` (block reference, similarity), computed in the database: an exact
        scan, or past the threshold the user's HNSW index (:mod:`memlane.core.store.postgres.ann`); filters
        and expiry as :func:`memlane.core.store.postgres.search.vector_top_blocks` applies them. On Citus a
        search without filters runs on the user's node (:meth:`gather`), through the index on the user's
        shard; a filtered one is routed statement by statement, and scans exactly."""
        if self.citus and not restricts(filters):
            ask = Gather("", query, False, k, kinds, after, before, BM25_K1, BM25_B, now=now)
            read = self._on_users_node(user, ask)
            if read is not None:
                return read.rankings["vector"]
        unindexed: list[int] = []
        with self.transaction() as conn:
            found = search.vector_top_blocks(
                conn, user, query, k, kinds=kinds, after=after, before=before,
                ann=EXACT if self.citus else self.ann_settings, build_index=unindexed.append, filters=filters,
                now=now,
            )  # fmt: skip
        # After the search's transaction: CREATE INDEX CONCURRENTLY waits for every older transaction.
        for user_id in unindexed:
            self.ann.ensure(user_id)
        return found

    def build_index(self, user: str) -> IndexStatus:
        """Make the user's approximate index now, if the user is at or past the threshold and has none
        (:mod:`memlane.core.store.postgres.ann`)."""
        user_id, keys = self._index_user(user)
        if self.ann_settings.applies(keys):
            self.ann.build_now(user_id)
        return self.index_status(user)[0]

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: of every user, by name) stands."""
        if user is not None:
            rows = [(*self._index_user(user), user)]
        else:
            rows = [(int(i), int(n), str(name)) for i, n, name in self.query(
                "SELECT id, n_keys, name FROM users ORDER BY name")]  # fmt: skip
        return [self._index_status(i, name, n) for i, n, name in rows]

    def _index_status(self, user_id: int, user: str, keys: int) -> IndexStatus:
        if self.citus and not self.ann_settings.applies(keys):  # below the threshold: its worker is not asked
            return IndexStatus(user, keys, False, "none")
        place = self._ann_place(user_id)
        with place.connect() as conn:
            return ann.status(conn, self.ann_settings, place.index, user, keys)

    def _index_user(self, user: str) -> tuple[int, int]:
        rows = self.query("SELECT id, n_keys FROM users WHERE id = %s AND name = %s", (user_key(user), user))
        if not rows:
            raise NotFoundError(f"user {user!r} not found")
        return int(rows[0][0]), int(rows[0][1])

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
        """BM25 top-k blocks of ``user`` (block reference, BM25 score, higher is better)."""
        with self.transaction() as conn:
            return search.bm25_top_blocks(
                conn, user, query, k, kinds=kinds, after=after, before=before, k1=k1, b=b, filters=filters, now=now
            )

    def gather(self, user: str, ask: Gather) -> Gathered:
        """A search's reads: on Citus, without filters, in one call of a function the coordinator hands to the
        user's node (:mod:`memlane.core.store.postgres.delegated`); otherwise one method each."""
        if self.citus and not restricts(ask.filters):
            found = self._on_users_node(user, ask)
            if found is not None:
                return found
        return gather_stepwise(self, user, ask)

    def _on_users_node(self, user: str, ask: Gather) -> Gathered | None:
        """``ask`` read by the function on the user's node; None if the user's shard moved as the call went
        out (the caller reads through the coordinator). A user past the threshold with no index gets one."""
        user_id = user_key(user)
        try:
            with self.autocommit() as conn:
                found, unindexed = delegated.gather(conn, user, user_id, ask, self.ann_settings, now_epoch(ask.now))
        except delegated.Elsewhere:
            return None
        if unindexed:
            self.ann.ensure(user_id)
        return found

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """The query terms' counts in the user's sessions' people's words
        (:func:`memlane.core.store.postgres.search.session_word_counts`); None when nothing can match."""
        if not sessions:
            return None
        with self.transaction() as conn:
            return search.session_word_counts(conn, user, query, sessions)

    # -- embedding cache ---------------------------------------------------------------------------------

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

    # -- diagnostics -------------------------------------------------------------------------------------

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """One committed row (:mod:`memlane.core.store.postgres.probe`); StoreError with a reason when the
        database cannot take a write now."""
        try:
            with self._pool.connection(timeout=timeout_s) as conn:
                probe_write(conn, timeout_s)
        except psycopg.Error as exc:
            raise StoreError(f"write probe failed on {self._where}: {exc}", reason=postgres_reason(exc)) from exc

    def user_row_counts(self, user: str) -> dict[str, int]:
        """Rows each table holds for ``user``: for deletion checks."""
        uid = user_key(user)
        rows = self.query("SELECT id FROM users WHERE id = %s AND name = %s", (uid, user))
        out = {
            table: int(self.query(f"SELECT count(*) FROM {table} WHERE user_id = %s", (uid,))[0][0])
            for table in (
                "blocks",
                "search_keys",
                "key_vectors",
                "jobs",
                "session_terms",
                "session_lengths",
                "sessions",
                "api_keys",
                "retention_policies",
                "llm_calls",
            )
        }
        out["users"] = len(rows)
        place = self._ann_place(uid)
        with place.connect() as conn:
            out["ann_index"] = int(ann.index_state(conn, place.index) != "none")
        return out

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


def _block_filter(user: str, conversation_id: str | None, session_id: str | None) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) of a listing of the user's live blocks."""
    uid = user_key(user)
    where = ["u.id = %s", "b.user_id = %s", "u.name = %s", "(b.expires_ts IS NULL OR b.expires_ts > %s)"]
    params: list[object] = [uid, uid, user, now_epoch()]
    if conversation_id is not None:
        where.append("b.conversation_id = %s")
        params.append(conversation_id)
    if session_id is not None:
        where.append("b.session_id = %s")
        params.append(session_id)
    return " AND ".join(where), params


def _refuse_collision(conn: Conn, user_id: int, user: str) -> None:
    """After an insert of ``user`` that found its id taken: StoreError if another name holds that id (two
    names with one hash, :mod:`memlane.core.store.postgres.tenant`); a row of this very name is fine."""
    row = conn.execute("SELECT name FROM users WHERE id = %s", (user_id,)).fetchone()
    if row is not None and str(row[0]) != user:
        raise held_by(user, user_id, str(row[0]))
