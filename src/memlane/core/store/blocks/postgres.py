"""Blocks in the PostgreSQL store: the one transaction of an add (blocks, keys, tsvectors, vectors, jobs; on Citus
one call of a function on the user's node), reads by id, listing and browsing with filters, updates and deletes.
:class:`PostgresBlocks` is the store's :class:`memlane.core.store.blocks.Blocks`; the statements other rooms
share are in :mod:`memlane.core.store.blocks.postgres_rows`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import NotFoundError, StoreError
from memlane.core.jobs import EXTRACT_KIND
from memlane.core.model import (
    Filters,
    MemoryBlock,
    Page,
)
from memlane.core.store.blocks import ALL_BLOCKS, DEFAULT_WRITE, BlockBrowse, BlockListing, BlockUpdate, BlockWrite
from memlane.core.store.blocks.postgres_rows import (
    COLUMNS,
    LIVE,
    add_session_terms,
    blocks_by_pk,
    copy_blocks,
    delete_blocks,
    drop_cached,
    filter_sql,
    last_exchange,
    now_epoch,
    sides_json,
    take_session_terms,
    to_block,
)
from memlane.core.store.blocks.rows import EXCHANGE_JOIN, continue_sessions, found_blocks
from memlane.core.store.postgres import delegated
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import NOW
from memlane.core.store.postgres.keys import bump_user, delete_block_keys, insert_keys, next_ids
from memlane.core.store.postgres.tenant import user_key
from memlane.core.store.sessions.postgres import ensure_sessions, expiry, open_session
from memlane.core.store.users.deletions import name_sha256
from memlane.core.store.users.postgres_rows import check_not_deleted
from memlane.core.timefmt import now_utc, to_epoch


def _block_filter(user: str, listing: BlockListing) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) of a listing of the user's live blocks."""
    uid = user_key(user)
    pairs = listing.equalities()
    where = "u.id = %s AND b.user_id = %s AND u.name = %s AND (b.expires_ts IS NULL OR b.expires_ts > %s)"
    where += "".join(f" AND {column} = %s" for column, _ in pairs)
    return where, [uid, uid, user, now_epoch(), *(value for _, value in pairs)]


class PostgresBlocks(PostgresBase):
    """Blocks in a PostgreSQL store."""

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
            blocks = blocks_by_pk(conn, user_id, pks)
            delete_blocks(conn, user_id, pks)
        return blocks

    def update_block(
        self, user: str, block: MemoryBlock, vectors: Vectors | None, how: BlockUpdate, *, now: float
    ) -> MemoryBlock:
        """Here the old keys' ANN entries go with their vectors (the index follows the table in the same
        transaction), and the sessions' people's words move with the text."""
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
            session = open_session(conn, user, user_id, session_id)
            status = block.extraction_status.value
            if vectors is not None:
                conn.execute("DELETE FROM jobs WHERE user_id = %s AND block_pk = %s", (user_id, pk))
                drop_cached(conn, user_id, [pk])
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
            if how.reset_ttl:
                expires = expiry(now, block.ttl_s, None if session[6] is None else int(session[6]), how.default_ttl_s)
                conn.execute("UPDATE blocks SET expires_ts = %s WHERE user_id = %s AND pk = %s", (expires, user_id, pk))
            if how.enqueue_attempts:
                self._enqueue(conn, user_id, pk, how.enqueue_attempts, now)
            (stored,) = blocks_by_pk(conn, user_id, [pk])
        return stored

    def browse_blocks(self, user: str, browse: BlockBrowse, *, now: float) -> Page[MemoryBlock]:
        column = "b.ingest_ts" if browse.order == "ingested" else "b.event_ts"
        limit, offset = browse.limit, browse.offset
        with self.transaction() as conn:
            user_id = self._user_row(conn, user)
            if user_id is None:
                return Page([], 0, limit, offset)
            params: dict[str, object] = {"u": user_id, "now": now}
            rules = filter_sql(browse.filters, params, after=browse.after, before=browse.before)
            where = f"b.user_id = %(u)s AND {LIVE}{rules}"
            total = conn.execute(f"SELECT count(*) FROM blocks b WHERE {where}", params).fetchone()
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE {where} "
                f"ORDER BY {column} DESC, b.id DESC LIMIT %(limit)s OFFSET %(offset)s",
                {**params, "limit": limit, "offset": offset},
            ).fetchall()
        return Page([to_block(r) for r in rows], int(total[0]) if total else 0, limit, offset)

    def write_blocks(
        self, user: str, blocks: Sequence[MemoryBlock], vectors: Vectors, how: BlockWrite = DEFAULT_WRITE
    ) -> list[int]:
        """On Citus, one call of a function on the user's node."""
        enqueue_attempts, default_ttl_s = how.enqueue_attempts, how.default_ttl_s
        if len(blocks) != len(vectors):
            raise StoreError(f"{len(blocks)} blocks but {len(vectors)} vectors")
        if self.citus:
            try:
                with self.autocommit() as conn:
                    job_ids = delegated.write(
                        conn, user, user_key(user), blocks, vectors, since=how.epoch, name_sha256=name_sha256(user),
                        now=to_epoch(now_utc()), attempts=enqueue_attempts, default_ttl_s=default_ttl_s,
                    )  # fmt: skip
            except delegated.Elsewhere:
                pass  # the user's shard moved as the call went out: written through the coordinator instead
            else:
                self.cache_within(None, how.cache_entries)()
                return job_ids
        with self.transaction() as conn:
            user_id = self._lock_user(conn, user, create=True)
            assert user_id is not None
            check_not_deleted(conn, user, how.epoch)  # after the lock: it sees a deletion it waited for
            pks = next_ids(conn, "blocks_pk_seq", len(blocks))
            # Under the user's row lock: no other write of the user comes between this read and the COPY.
            blocks = continue_sessions(blocks, lambda c, s: last_exchange(conn, user_id, c, s))
            ttls = ensure_sessions(conn, user, user_id, blocks, to_epoch(now_utc()))
            expires = [expiry(to_epoch(b.ingest_time), b.ttl_s, ttls.get(b.session_id), default_ttl_s) for b in blocks]
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
            later = self.cache_within(conn, how.cache_entries)
            bump_user(conn, user_id, *added)
        later()
        return job_ids

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
            (block,) = blocks_by_pk(conn, user_id, [int(row[0])])
            delete_blocks(conn, user_id, [int(row[0])])
        return block

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        """One block of ``user``; NotFoundError if it does not exist or is someone else's."""
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id "
            f"WHERE u.id = %(uid)s AND b.user_id = %(uid)s AND u.name = %(user)s AND b.id = %(id)s AND {LIVE}",
            {"user": user, "uid": user_key(user), "id": block_id, "now": now_epoch()},
        )
        return found_blocks(rows, user, block_id)[0]

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        # The block by its id, then its exchange through blocks_user_session (user, conversation, session,
        # exchange index): a few rows, whatever the user's size.
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks x JOIN users u ON u.id = x.user_id {EXCHANGE_JOIN} "
            f"WHERE x.id = %(id)s AND u.id = %(uid)s AND x.user_id = %(uid)s AND u.name = %(user)s "
            f"AND (x.expires_ts IS NULL OR x.expires_ts > %(now)s) "
            f"AND {LIVE} AND b.ingest_ts = x.ingest_ts AND b.content_hash = x.content_hash "
            "ORDER BY b.id <> x.id, b.perspective, b.id",
            {"user": user, "uid": user_key(user), "id": block_id, "now": now_epoch()},
        )
        return found_blocks(rows, user, block_id)

    def list_blocks(
        self, user: str, listing: BlockListing = ALL_BLOCKS, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryBlock]:
        where, params = _block_filter(user, listing)
        rows = self.query(
            f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE {where} "
            "ORDER BY b.event_ts, b.conversation_id, b.session_id, b.exchange_index, b.pk LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        return [to_block(r) for r in rows]

    def count_blocks(self, user: str, listing: BlockListing = ALL_BLOCKS) -> int:
        where, params = _block_filter(user, listing)
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
