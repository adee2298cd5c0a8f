"""Blocks in the SQLite store: the one transaction of an add (blocks, keys, vectors, terms, jobs), reads by id,
listing and browsing with filters, updates and deletes. :class:`SqliteBlocks` is the store's
:class:`memlane.core.store.blocks.Blocks`; the statements other rooms share are in
:mod:`memlane.core.store.blocks.sqlite_rows`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import (
    NotFoundError,
    StoreError,
)
from memlane.core.jobs import EXTRACT_KIND
from memlane.core.model import (
    ExtractionStatus,
    Filters,
    MemoryBlock,
    Page,
)
from memlane.core.ranking.session_words import people_words
from memlane.core.store.blocks import ALL_BLOCKS, DEFAULT_WRITE, BlockBrowse, BlockListing, BlockUpdate, BlockWrite
from memlane.core.store.blocks.rows import EXCHANGE_JOIN, continue_sessions, found_blocks, row_to_block
from memlane.core.store.blocks.rows import FULL_BLOCK_COLUMNS as BLOCK_COLUMNS
from memlane.core.store.blocks.sqlite_rows import (
    LIVE,
    blocks_by_pk,
    delete_blocks,
    drop_cached,
    filter_sql,
    live_count,
)
from memlane.core.store.candidates.terms import UserTerms
from memlane.core.store.candidates.vectors import UserMatrix
from memlane.core.store.sessions.sqlite import effective_ttl, expiry, open_sessions, require_open
from memlane.core.store.sqlite.base import SqliteBase, dt_of, time_now, ts_of
from memlane.core.store.sqlite.keys import insert_keys, retire_keys
from memlane.core.store.users.sqlite import ensure_user
from memlane.core.timefmt import now_utc, to_epoch


def _listing_sql(listing: BlockListing) -> tuple[str, list[object]]:
    """The `` AND ...`` conditions (and their parameters) of a listing, on blocks ``b``."""
    pairs = listing.equalities()
    return "".join(f" AND {column} = ?" for column, _ in pairs), [value for _, value in pairs]


class SqliteBlocks(SqliteBase):
    """Blocks in a SQLite store."""

    def write_blocks(
        self, user: str, blocks: Sequence[MemoryBlock], vectors: Vectors, how: BlockWrite = DEFAULT_WRITE
    ) -> list[int]:
        if len(blocks) != len(vectors):
            raise StoreError(f"{len(blocks)} blocks but {len(vectors)} vectors")
        enqueue_attempts, default_ttl_s = how.enqueue_attempts, how.default_ttl_s
        with self._write() as conn:
            now = to_epoch(now_utc())
            user_id, version, _ = ensure_user(conn, user, now, how.epoch)
            ttls = open_sessions(conn, user, user_id, blocks, now)
            blocks = [
                replace(
                    b,
                    expires_at=dt_of(
                        expiry(to_epoch(b.ingest_time), effective_ttl(b.ttl_s, ttls[b.session_id], default_ttl_s))
                    ),
                    last_queued_at=now_utc() if enqueue_attempts else None,
                )
                for b in blocks
            ]
            rows, job_ids = self._insert_blocks(conn, user_id, blocks, vectors, enqueue_attempts)
            if how.cache_entries and how.cache_entries[1]:
                self.put_vectors_in(conn, *how.cache_entries)
            conn.execute("UPDATE users SET version = version + 1 WHERE id = ?", (user_id,))
        self.cache_written(user_id, version, rows)
        return job_ids

    def _insert_blocks(
        self, conn: sqlite3.Connection, user_id: int, blocks: Sequence[MemoryBlock], vectors: Vectors, enqueue: int
    ) -> tuple[tuple[UserMatrix, UserTerms], list[int]]:
        """Insert blocks and their message keys; with ``enqueue`` > 0, one extraction job per block (at most
        ``enqueue`` attempts) in the same transaction: the outbox. Exchange indexes continue the session's
        (:func:`memlane.core.store.blocks.rows.continue_sessions`)."""
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
                    b.ttl_s, ts_of(b.expires_at), ts_of(b.updated_at), b.prompt_id, b.prompt_version, b.fail_count,
                    ts_of(b.last_queued_at),
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
            (block,) = blocks_by_pk(conn, [int(block_pk)])
            delete_blocks(conn, int(user_id), [int(block_pk)])
        self.cache_drop(user_id)
        self.checkpoint()
        return block

    def delete_blocks(self, user: str, filters: Filters) -> list[MemoryBlock]:
        """Delete the user's blocks that pass ``filters`` in one write transaction, through the path every
        delete takes (:func:`memlane.core.store.blocks.sqlite_rows.delete_blocks`), and return them as they were."""
        where, params = filter_sql(filters)
        with self._write() as conn:
            row = conn.execute("SELECT id FROM users WHERE name = ?", (user,)).fetchone()
            if row is None:
                return []
            user_id = int(row[0])
            found = conn.execute(f"SELECT b.pk FROM blocks b WHERE b.user_id = ? AND {where}", (user_id, *params))
            pks = [int(r[0]) for r in found]
            blocks = blocks_by_pk(conn, pks)
            delete_blocks(conn, user_id, pks)
        if pks:
            self.cache_drop(user_id)
            self.checkpoint()
        return blocks

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE b.id = ? AND u.name = ? "
            f"AND {LIVE}",
            (block_id, user, time_now()),
        )
        return found_blocks(rows, user, block_id)[0]

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        now = time_now()
        # The block by its id, then its exchange through blocks_user_session (user, conversation, session,
        # exchange index): a few rows, whatever the user's size.
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} FROM blocks x JOIN users u ON u.id = x.user_id {EXCHANGE_JOIN} "
            f"WHERE x.id = ? AND u.name = ? AND (x.expires_ts IS NULL OR x.expires_ts > ?) AND {LIVE} "
            "AND b.ingest_ts = x.ingest_ts AND b.content_hash = x.content_hash "
            "ORDER BY b.id <> x.id, b.perspective, b.id",
            (block_id, user, now, now),
        )
        return found_blocks(rows, user, block_id)

    def list_blocks(
        self, user: str, listing: BlockListing = ALL_BLOCKS, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryBlock]:
        where, params = _listing_sql(listing)
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE u.name = ? AND {LIVE}{where} "
            "ORDER BY b.event_ts, b.conversation_id, b.session_id, b.exchange_index, b.pk LIMIT ? OFFSET ?",
            [user, time_now(), *params, limit, offset],
        )
        return [row_to_block(r) for r in rows]

    def count_blocks(self, user: str, listing: BlockListing = ALL_BLOCKS) -> int:
        """Counted as :func:`live_count` counts."""
        row = self._user_row(user)
        if row is None:
            return 0
        where, params = _listing_sql(listing)
        cond = f"b.user_id = ?{where}"
        rows = self._read(f"SELECT {live_count(cond)}", [row[0], *params, row[0], *params, time_now()])
        return int(rows[0][0])

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]:
        """Blocks by internal reference, only those of ``user`` (and live)."""
        now = time_now()
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

    def update_block(
        self, user: str, block: MemoryBlock, vectors: Vectors | None, how: BlockUpdate, *, now: float
    ) -> MemoryBlock:
        enqueue_attempts = how.enqueue_attempts
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
            session_ttl = require_open(conn, user, user_id, session_id)
            if how.reset_ttl:
                expires_ts = expiry(now, effective_ttl(block.ttl_s, session_ttl, how.default_ttl_s))
            if vectors is not None:
                drop_cached(conn, user_id, [pk])
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
            queued = ts_of(block.last_queued_at)
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
            (stored,) = blocks_by_pk(conn, [pk])
        if vectors is not None:
            self.cache_drop(user_id)
        if removes:
            self.checkpoint()
        return stored

    def browse_blocks(self, user: str, browse: BlockBrowse, *, now: float) -> Page[MemoryBlock]:
        where, params = filter_sql(browse.filters, after=browse.after, before=browse.before)
        by = "b.ingest_ts DESC, b.id DESC" if browse.order == "ingested" else "b.event_ts DESC, b.id DESC"
        base = f"FROM blocks b JOIN users u ON u.id = b.user_id WHERE u.name = ? AND {LIVE} AND {where}"
        total = int(self._read(f"SELECT count(*) {base}", (user, now, *params))[0][0])
        rows = self._read(
            f"SELECT {BLOCK_COLUMNS} {base} ORDER BY {by} LIMIT ? OFFSET ?",
            (user, now, *params, browse.limit, browse.offset),
        )
        return Page([row_to_block(r) for r in rows], total, browse.limit, browse.offset)
