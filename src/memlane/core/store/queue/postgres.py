"""The extraction queue in the store's own database (outbox): ``FOR UPDATE SKIP LOCKED`` claims with a lease.

A claim is one short transaction: return expired leases to the queue (or to ``dead`` after the last
attempt), then lease the next ready jobs, skipping rows another worker is claiming at that moment, so
workers on many machines never wait for each other. The LLM call happens outside any transaction (a lease
column, not a held row lock: a long transaction would pin a connection and block vacuum). Completion
writes the summary, facts and their keys and marks the job done in one transaction, only while the worker
still owns the lease. Times come from the database's clock, the one clock every worker shares. On Citus,
which runs ``FOR UPDATE`` on one shard at a time, the claim leases one user's jobs at a time
(:meth:`PostgresJobQueue._claim_per_user`), still in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.jobs import CacheEntries, ClaimedJob, ExtractionResult, JobStatus, QueueStatus, Requeue, Requeued
from memlane.core.model import ExtractionStatus, MemoryBlock, content_hash
from memlane.core.store.blocks.postgres_rows import COLUMNS, LIVE, blocks_by_pk, to_block
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.dialect import NOW, Conn
from memlane.core.store.postgres.keys import bump_user, delete_block_keys, insert_keys
from memlane.core.store.postgres.tenant import user_key
from memlane.core.store.queue import claimed_jobs, queue_status
from memlane.core.timefmt import to_epoch

# Never inside CASE or COALESCE: a distributed store (Citus) evaluates the clock once, before it sends a
# statement to a node, and refuses it where it would be evaluated conditionally (hence ``NOW * CASE ... 1``).


_REAP = f"""
WITH r AS (
    SELECT user_id, id FROM jobs WHERE status = 'running' AND lease_until < {NOW} {{only}} FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET
    status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END,
    lease_owner = NULL, lease_until = NULL, updated_at = {NOW},
    finished_at = {NOW} * CASE WHEN j.attempts >= j.max_attempts THEN 1 END,
    last_error = CASE WHEN j.attempts >= j.max_attempts
        THEN coalesce(j.last_error || ' / ', '') || 'lease expired on the last attempt' ELSE j.last_error END
FROM r WHERE j.user_id = r.user_id AND j.id = r.id
RETURNING j.user_id, j.block_pk, j.status
"""


_CLAIM = f"""
WITH c AS (
    SELECT user_id, id FROM jobs WHERE status = 'queued' AND run_after <= {NOW} {{only}}
    ORDER BY priority DESC, run_after, id LIMIT %(n)s FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'running', lease_owner = %(owner)s, lease_until = {NOW} + %(lease)s,
    attempts = j.attempts + 1, updated_at = {NOW}
FROM c WHERE j.user_id = c.user_id AND j.id = c.id
RETURNING j.id, j.block_pk, j.attempts, j.max_attempts, j.llm_failures, j.user_id
"""


class PostgresJobQueue:
    """:class:`~memlane.core.jobs.JobQueue` over a :class:`PostgresBase`."""

    def __init__(self, store: PostgresBase) -> None:
        self.store = store

    def claim(self, owner: str, n: int, lease_s: float, *, job_ids: Sequence[int] | None = None) -> list[ClaimedJob]:
        if n <= 0 or (job_ids is not None and not job_ids):
            return []
        params: dict[str, object] = {"owner": owner, "lease": lease_s, "n": n}
        only = ""
        if job_ids is not None:
            only = "AND id = ANY(%(ids)s)"
            params["ids"] = list(job_ids)
        with self.store.transaction() as conn:
            if self.store.citus:
                rows = self._claim_per_user(conn, only, params)
            else:
                self._reap(conn)
                rows = conn.execute(_CLAIM.replace("{only}", only), params).fetchall()
            if not rows:
                return []
            blocks: dict[int, MemoryBlock] = {}
            for user_id, pks in _by_user((int(r[5]), int(r[1])) for r in rows).items():
                blocks.update(
                    (int(r[0]), to_block(r))
                    for r in conn.execute(
                        f"SELECT {COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id "
                        "WHERE u.id = %s AND b.user_id = %s AND b.pk = ANY(%s::bigint[])",
                        (user_id, user_id, pks),
                    )
                )
        return claimed_jobs(owner, rows, blocks)

    def _claim_per_user(self, conn: Conn, only: str, params: dict[str, object]) -> list[tuple[Any, ...]]:
        """The claim on a distributed store, which runs ``FOR UPDATE`` only on one shard at a time: the users
        with expired leases, then those with the next ready jobs (each found by a read of every shard, no row
        locked), then the same reap and claim as on one server restricted to one user at a time, in this one
        transaction, so each job is still leased to exactly one worker."""
        for (user_id,) in conn.execute(
            f"SELECT DISTINCT user_id FROM jobs WHERE status = 'running' AND lease_until < {NOW}"
        ).fetchall():
            self._reap(conn, int(user_id))
        ready = conn.execute(
            f"SELECT user_id FROM jobs WHERE status = 'queued' AND run_after <= {NOW} {only} "
            "ORDER BY priority DESC, run_after, id LIMIT %(n)s",
            params,
        ).fetchall()
        rows: list[tuple[Any, ...]] = []
        for user_id in dict.fromkeys(int(r[0]) for r in ready):
            left = int(str(params["n"])) - len(rows)
            if left <= 0:
                break
            claim = _CLAIM.replace("{only}", f"{only} AND user_id = %(uid)s")
            rows += conn.execute(claim, {**params, "n": left, "uid": user_id}).fetchall()
        return rows

    @staticmethod
    def _reap(conn: Conn, user_id: int | None = None) -> None:
        # Jobs whose worker vanished: back to the queue, or dead (block marked failed) after the last attempt.
        only, params = ("", {}) if user_id is None else ("AND user_id = %(uid)s", {"uid": user_id})
        dead = [(r[0], r[1]) for r in conn.execute(_REAP.replace("{only}", only), params).fetchall() if r[2] == "dead"]
        for uid, pks in _by_user(dead).items():
            conn.execute(
                "UPDATE blocks SET extraction_status = %s, fail_count = fail_count + 1 "
                "WHERE user_id = %s AND pk = ANY(%s::bigint[])",
                (ExtractionStatus.FAILED.value, uid, pks),
            )

    def extend(self, owner: str, job_ids: Sequence[int], lease_s: float) -> int:
        if not job_ids:
            return 0
        with self.store.transaction() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET lease_until = {NOW} + %s, updated_at = {NOW} "
                "WHERE id = ANY(%s) AND status = 'running' AND lease_owner = %s",
                (lease_s, list(job_ids), owner),
            )
            return int(cur.rowcount)

    def complete(
        self, job: ClaimedJob, result: ExtractionResult, vectors: Vectors, cache_entries: CacheEntries | None = None
    ) -> bool:
        texts = [result.summary, *result.facts]
        kinds = ["summary"] + ["fact"] * len(result.facts)
        with self.store.transaction() as conn:
            # The user's row first: the lock order every writer follows (users, jobs, blocks, keys).
            user_id = user_key(job.block.user)
            row = conn.execute("SELECT id FROM users WHERE id = %s FOR NO KEY UPDATE", (user_id,)).fetchone()
            if row is None:
                return False  # the user (and so the job) was deleted meanwhile
            cur = conn.execute(
                f"UPDATE jobs SET status = 'done', lease_owner = NULL, lease_until = NULL, finished_at = {NOW}, "
                f"updated_at = {NOW}, llm_failures = 0, llm_failing_since = NULL "
                "WHERE user_id = %s AND id = %s AND status = 'running' AND lease_owner = %s",
                (user_id, job.job_id, job.owner),
            )
            if cur.rowcount != 1:
                return False
            removed = delete_block_keys(conn, user_id, [job.block_ref], keep_messages=True)
            conn.execute(
                "UPDATE blocks SET summary = %s, contexts = %s, extraction_status = %s, extraction_prompt = %s, "
                "extraction_writes = extraction_writes + 1 WHERE user_id = %s AND pk = %s",
                (
                    result.summary,
                    json.dumps(list(result.facts)),
                    ExtractionStatus.DONE.value,
                    result.prompt_ref,
                    user_id,
                    job.block_ref,
                ),
            )
            ts = to_epoch(job.block.event_time)
            added = insert_keys(
                conn,
                self.store.vector_oid,
                user_id,
                [(job.block_ref, k, t, content_hash(t), ts) for k, t in zip(kinds, texts, strict=True)],
                vectors,
            )
            later = self.store.cache_within(conn, cache_entries)
            bump_user(conn, user_id, added[0] - removed[0], added[1] - removed[1])
        later()
        return True

    def fail(self, job: ClaimedJob, error: str, raw: str | None, retry_in_s: float) -> JobStatus | None:
        with self.store.transaction() as conn:
            row = conn.execute(
                f"UPDATE jobs SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END, "
                f"lease_owner = NULL, lease_until = NULL, run_after = {NOW} + %s, last_error = %s, "
                f"raw_response = %s, updated_at = {NOW}, llm_failures = 0, llm_failing_since = NULL, "
                f"finished_at = {NOW} * CASE WHEN attempts >= max_attempts THEN 1 END "
                "WHERE id = %s AND status = 'running' AND lease_owner = %s RETURNING status, user_id, block_pk",
                (retry_in_s, error[:4000], None if raw is None else raw[:20000], job.job_id, job.owner),
            ).fetchone()
            if row is None:
                return None
            status = JobStatus(row[0])
            # Every failed attempt counts on the block (that API's fail_count); the last one fails it.
            conn.execute(
                "UPDATE blocks SET fail_count = fail_count + 1, extraction_status = coalesce(%s, extraction_status) "
                "WHERE user_id = %s AND pk = %s",
                (ExtractionStatus.FAILED.value if status is JobStatus.DEAD else None, row[1], row[2]),
            )
        return status

    def defer(self, job: ClaimedJob, error: str, retry_in_s: float) -> JobStatus | None:
        with self.store.transaction() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, run_after = {NOW} + %s, "
                "attempts = greatest(attempts - 1, 0), llm_failures = llm_failures + 1, "
                f"llm_failing_since = least(llm_failing_since, {NOW}), last_error = %s, updated_at = {NOW} "
                "WHERE id = %s AND status = 'running' AND lease_owner = %s",
                (retry_in_s, error[:4000], job.job_id, job.owner),
            )
        return JobStatus.QUEUED if cur.rowcount == 1 else None

    def requeue(self, which: Requeue) -> Requeued:
        where, params = _filters(which.user, which.since, which.block_ids)
        with self.store.transaction() as conn:
            dead = conn.execute(
                f"UPDATE jobs SET status = 'queued', attempts = 0, run_after = {NOW}, finished_at = NULL, "
                "lease_owner = NULL, lease_until = NULL, llm_failures = 0, llm_failing_since = NULL, "
                f"updated_at = {NOW} WHERE status = 'dead'{where} RETURNING user_id, block_pk",
                params,
            ).fetchall()
            for uid, pks in _by_user(dead).items():
                conn.execute(
                    f"UPDATE blocks SET extraction_status = %s, last_queued_ts = {NOW} "
                    "WHERE user_id = %s AND pk = ANY(%s::bigint[])",
                    (ExtractionStatus.QUEUED.value, uid, pks),
                )
            waiting = 0
            if not which.dead_only:
                waiting = conn.execute(
                    f"UPDATE jobs SET run_after = {NOW} WHERE status = 'queued' AND run_after > {NOW} "
                    f"AND (attempts > 0 OR llm_failures > 0){where}",
                    params,
                ).rowcount
        return Requeued(len(dead), int(waiting))

    def statuses(self, job_ids: Sequence[int]) -> dict[int, JobStatus]:
        if not job_ids:
            return {}
        rows = self.store.query("SELECT id, status FROM jobs WHERE id = ANY(%s)", (list(job_ids),))
        return {int(i): JobStatus(st) for i, st in rows}

    def status(self, *, recent_errors: int = 5) -> QueueStatus:
        with self.store.transaction() as conn:
            counts = {str(s): int(n) for s, n in conn.execute("SELECT status, count(*) FROM jobs GROUP BY status")}
            row = conn.execute(f"SELECT {NOW} - min(created_at) FROM jobs WHERE status = 'queued'").fetchone()
            oldest = None if row is None or row[0] is None else max(0.0, float(row[0]))
            row = conn.execute(
                f"SELECT count(*) FROM jobs WHERE status = 'done' AND finished_at >= {NOW} - 300"
            ).fetchone()
            done_recent = int(row[0]) if row else 0
            errors = conn.execute(
                "SELECT j.id, b.id, u.name, j.status, j.attempts, j.last_error, j.updated_at FROM jobs j "
                "JOIN blocks b ON b.user_id = j.user_id AND b.pk = j.block_pk JOIN users u ON u.id = j.user_id "
                "WHERE j.last_error IS NOT NULL AND j.status <> 'done' ORDER BY j.updated_at DESC, j.id DESC LIMIT %s",
                (recent_errors,),
            ).fetchall()
            outage = conn.execute(
                f"SELECT count(*), min(llm_failing_since), greatest(min(run_after) - {NOW}, 0) "
                "FROM jobs WHERE status = 'queued' AND llm_failures > 0"
            ).fetchone()
            newest = conn.execute(
                "SELECT last_error FROM jobs WHERE status = 'queued' AND llm_failures > 0 "
                "ORDER BY updated_at DESC, id DESC LIMIT 1"
            ).fetchone()
            outage = None if outage is None else (*outage, None if newest is None else newest[0])
        return queue_status(counts, oldest, done_recent, errors, outage)


def _filters(user: str | None, since: float | None, block_ids: Sequence[str] | None) -> tuple[str, dict[str, object]]:
    """The WHERE conditions (each led by AND) of a requeue's optional filters, and their parameters."""
    where = ""
    params: dict[str, object] = {}
    if user is not None:
        where += " AND user_id = %(uid)s"
        params["uid"] = user_key(user)
    if since is not None:
        where += " AND updated_at >= %(since)s"
        params["since"] = since
    if block_ids is not None:
        where += " AND (user_id, block_pk) IN (SELECT user_id, pk FROM blocks WHERE id = ANY(%(ids)s))"
        params["ids"] = list(block_ids)
    return where, params


def _by_user(rows: Iterable[tuple[Any, Any]]) -> dict[int, list[int]]:
    """(user id, block pk) pairs grouped by user: statements that each name one user (one node of a
    distributed store)."""
    out: dict[int, list[int]] = {}
    for user_id, pk in rows:
        out.setdefault(int(user_id), []).append(int(pk))
    return out


class PostgresQueue(PostgresBase):
    """The extraction queue of a PostgreSQL store, and requeueing a block whose extraction failed."""

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
            self._enqueue(conn, user_id, int(row[0]), max_attempts, now)
            (block,) = blocks_by_pk(conn, user_id, [int(row[0])])
        return block

    def job_queue(self) -> PostgresJobQueue:
        """The extraction queue kept in this store's database."""
        return PostgresJobQueue(self)
