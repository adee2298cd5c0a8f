"""The extraction queue in the store's own file (outbox): claim with a lease, complete fenced by the owner.

SQLite serialises writers, so a claim is one ``BEGIN IMMEDIATE`` transaction: reap expired leases, then
lease the next jobs. The LLM call happens outside any transaction; completion writes the summary, the facts
and their search keys and marks the job done in one transaction, only if the worker still owns the lease.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import (
    NotFoundError,
    ValidationError,
)
from memlane.core.jobs import (
    EXTRACT_KIND,
    CacheEntries,
    ClaimedJob,
    ExtractionResult,
    JobStatus,
    QueueStatus,
    Requeue,
    Requeued,
)
from memlane.core.model import (
    ExtractionStatus,
    MemoryBlock,
    content_hash,
)
from memlane.core.store.blocks.rows import FULL_BLOCK_COLUMNS as BLOCK_COLUMNS
from memlane.core.store.blocks.rows import row_to_block
from memlane.core.store.blocks.sqlite_rows import LIVE, blocks_by_pk
from memlane.core.store.queue import claimed_jobs, queue_status
from memlane.core.store.sqlite.base import SqliteBase
from memlane.core.store.sqlite.keys import delete_keys, insert_keys
from memlane.core.timefmt import now_utc, to_epoch

# A job row is the claimed job only while its block is still the claimed block: SQLite hands out the ids of
# deleted rows again (a deleted user's newest jobs and blocks), so a worker that claimed a job of a user
# deleted meanwhile must not write into a job and block that now carry another user's ids. Block ids
# (random, time-ordered) are never reused.
SAME_BLOCK = "block_pk = ? AND EXISTS (SELECT 1 FROM blocks b WHERE b.pk = jobs.block_pk AND b.id = ?)"


def _now() -> float:
    return to_epoch(now_utc())


class SqliteJobQueue:
    """:class:`~memlane.core.jobs.JobQueue` over a :class:`SqliteBase`."""

    def __init__(self, store: SqliteBase) -> None:
        self.store = store

    def claim(self, owner: str, n: int, lease_s: float, *, job_ids: Sequence[int] | None = None) -> list[ClaimedJob]:
        now = _now()
        with self.store.transaction() as conn:
            self._reap(conn, now)
            only = ""
            params: list[object] = [owner, now + lease_s, now, now]
            if job_ids is not None:
                if not job_ids:
                    return []
                only = f"AND id IN ({','.join('?' * len(job_ids))}) "
                params.extend(job_ids)
            params.append(n)
            rows = conn.execute(
                "UPDATE jobs SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1, "
                "updated_at = ? WHERE id IN (SELECT id FROM jobs WHERE status = 'queued' AND run_after <= ? "
                f"{only}ORDER BY priority DESC, run_after, id LIMIT ?) "
                "RETURNING id, block_pk, attempts, max_attempts, llm_failures",
                params,
            ).fetchall()
            if not rows:
                return []
            marks = ",".join("?" * len(rows))
            blocks = {
                int(r[0]): row_to_block(r)
                for r in conn.execute(
                    f"SELECT {BLOCK_COLUMNS} FROM blocks b JOIN users u ON u.id = b.user_id WHERE b.pk IN ({marks})",
                    [r[1] for r in rows],
                )
            }
        return claimed_jobs(owner, rows, blocks)

    @staticmethod
    def _reap(conn: sqlite3.Connection, now: float) -> None:
        # Jobs whose worker vanished: back to the queue, or dead when they have used every attempt.
        dead = conn.execute(
            "UPDATE jobs SET status = 'dead', lease_owner = NULL, lease_until = NULL, finished_at = ?, updated_at = ?, "
            "last_error = coalesce(last_error || ' / ', '') || 'lease expired on the last attempt' "
            "WHERE status = 'running' AND lease_until < ? AND attempts >= max_attempts RETURNING block_pk",
            (now, now, now),
        ).fetchall()
        if dead:
            conn.executemany(
                "UPDATE blocks SET extraction_status = ?, fail_count = fail_count + 1 WHERE pk = ?",
                [(ExtractionStatus.FAILED.value, r[0]) for r in dead],
            )
        conn.execute(
            "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, updated_at = ? "
            "WHERE status = 'running' AND lease_until < ?",
            (now, now),
        )

    def extend(self, owner: str, job_ids: Sequence[int], lease_s: float) -> int:
        if not job_ids:
            return 0
        now = _now()
        with self.store.transaction() as conn:
            cur = conn.execute(
                f"UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id IN ({','.join('?' * len(job_ids))}) "
                "AND status = 'running' AND lease_owner = ?",
                [now + lease_s, now, *job_ids, owner],
            )
            return int(cur.rowcount)

    def complete(
        self, job: ClaimedJob, result: ExtractionResult, vectors: Vectors, cache_entries: CacheEntries | None = None
    ) -> bool:
        now = _now()
        texts = [result.summary, *result.facts]
        kinds = ["summary"] + ["fact"] * len(result.facts)
        with self.store.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_until = NULL, finished_at = ?, "
                "updated_at = ?, llm_failures = 0, llm_failing_since = NULL "
                f"WHERE id = ? AND status = 'running' AND lease_owner = ? AND {SAME_BLOCK}",
                (now, now, job.job_id, job.owner, job.block_ref, job.block.id),
            )
            if cur.rowcount != 1:
                return False
            user_id, version = conn.execute(
                "SELECT u.id, u.version FROM users u JOIN blocks b ON b.user_id = u.id WHERE b.pk = ?",
                (job.block_ref,),
            ).fetchone()
            replaced = delete_keys(conn, "block_pk = ? AND kind != 'message'", (job.block_ref,))
            conn.execute(
                "UPDATE blocks SET summary = ?, contexts = ?, extraction_status = ?, extraction_prompt = ?, "
                "extraction_writes = extraction_writes + 1 WHERE pk = ?",
                (
                    result.summary,
                    json.dumps(list(result.facts)),
                    ExtractionStatus.DONE.value,
                    result.prompt_ref,
                    job.block_ref,
                ),
            )
            ts = to_epoch(job.block.event_time)
            rows = insert_keys(
                conn,
                user_id,
                [
                    (job.block_ref, k, t, content_hash(t), ts, job.block.session_id, "")
                    for k, t in zip(kinds, texts, strict=True)
                ],
                vectors,
                self.store.term_ids,
            )
            if cache_entries and cache_entries[1]:
                self.store.put_vectors_in(conn, *cache_entries)
            conn.execute("UPDATE users SET version = version + 1 WHERE id = ?", (user_id,))
        if replaced == 0:
            self.store.cache_written(user_id, version, rows)
        return True

    def fail(self, job: ClaimedJob, error: str, raw: str | None, retry_in_s: float) -> JobStatus | None:
        now = _now()
        with self.store.transaction() as conn:
            row = conn.execute(
                "SELECT attempts, max_attempts FROM jobs "
                f"WHERE id = ? AND status = 'running' AND lease_owner = ? AND {SAME_BLOCK}",
                (job.job_id, job.owner, job.block_ref, job.block.id),
            ).fetchone()
            if row is None:
                return None
            dead = int(row[0]) >= int(row[1])
            status = JobStatus.DEAD if dead else JobStatus.QUEUED
            conn.execute(
                "UPDATE jobs SET status = ?, lease_owner = NULL, lease_until = NULL, run_after = ?, last_error = ?, "
                "raw_response = ?, updated_at = ?, finished_at = ?, llm_failures = 0, llm_failing_since = NULL "
                "WHERE id = ?",
                (
                    status.value,
                    now + retry_in_s,
                    error[:4000],
                    None if raw is None else raw[:20000],
                    now,
                    now if dead else None,
                    job.job_id,
                ),
            )
            # Every failed attempt counts on the block (that API's fail_count); the last one fails it.
            conn.execute(
                "UPDATE blocks SET fail_count = fail_count + 1, extraction_status = coalesce(?, extraction_status) "
                "WHERE pk = ?",
                (ExtractionStatus.FAILED.value if dead else None, job.block_ref),
            )
        return status

    def defer(self, job: ClaimedJob, error: str, retry_in_s: float) -> JobStatus | None:
        now = _now()
        with self.store.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, run_after = ?, "
                "attempts = max(attempts - 1, 0), llm_failures = llm_failures + 1, "
                "llm_failing_since = coalesce(llm_failing_since, ?), last_error = ?, updated_at = ? "
                f"WHERE id = ? AND status = 'running' AND lease_owner = ? AND {SAME_BLOCK}",
                (now + retry_in_s, now, error[:4000], now, job.job_id, job.owner, job.block_ref, job.block.id),
            )
        return JobStatus.QUEUED if cur.rowcount == 1 else None

    def requeue(self, which: Requeue) -> Requeued:
        now = _now()
        ids = None if which.block_ids is None else list(dict.fromkeys(which.block_ids))
        chunks = [None] if ids is None else [ids[i : i + 500] for i in range(0, len(ids), 500)]
        done = Requeued()
        with self.store.transaction() as conn:
            for chunk in chunks:
                where, params = _filters(which.user, which.since, chunk)
                dead = conn.execute(
                    "UPDATE jobs SET status = 'queued', attempts = 0, run_after = ?, finished_at = NULL, "
                    "lease_owner = NULL, lease_until = NULL, llm_failures = 0, llm_failing_since = NULL, "
                    f"updated_at = ? WHERE status = 'dead'{where} RETURNING block_pk",
                    (now, now, *params),
                ).fetchall()
                conn.executemany(
                    "UPDATE blocks SET extraction_status = ?, last_queued_ts = ? WHERE pk = ?",
                    [(ExtractionStatus.QUEUED.value, now, r[0]) for r in dead],
                )
                waiting = 0
                if not which.dead_only:
                    waiting = conn.execute(
                        "UPDATE jobs SET run_after = ? WHERE status = 'queued' AND run_after > ? "
                        f"AND (attempts > 0 OR llm_failures > 0){where}",
                        (now, now, *params),
                    ).rowcount
                done += Requeued(len(dead), int(waiting))
        return done

    def statuses(self, job_ids: Sequence[int]) -> dict[int, JobStatus]:
        out: dict[int, JobStatus] = {}
        for start in range(0, len(job_ids), 500):
            chunk = list(job_ids[start : start + 500])
            rows = self.store.query(f"SELECT id, status FROM jobs WHERE id IN ({','.join('?' * len(chunk))})", chunk)
            out.update({int(i): JobStatus(st) for i, st in rows})
        return out

    def status(self, *, recent_errors: int = 5) -> QueueStatus:
        now = _now()
        counts = {str(s): int(n) for s, n in self.store.query("SELECT status, count(*) FROM jobs GROUP BY status")}
        oldest = self.store.query("SELECT min(created_at) FROM jobs WHERE status = 'queued'")[0][0]
        done_recent = self.store.query(
            "SELECT count(*) FROM jobs WHERE status = 'done' AND finished_at >= ?", (now - 300,)
        )[0][0]
        errors = self.store.query(
            "SELECT j.id, b.id, u.name, j.status, j.attempts, j.last_error, j.updated_at FROM jobs j "
            "JOIN blocks b ON b.pk = j.block_pk JOIN users u ON u.id = j.user_id "
            "WHERE j.last_error IS NOT NULL AND j.status != 'done' ORDER BY j.updated_at DESC, j.id DESC LIMIT ?",
            (recent_errors,),
        )
        outage = self.store.query(
            "SELECT count(*), min(llm_failing_since), min(run_after), "
            "(SELECT last_error FROM jobs WHERE status = 'queued' AND llm_failures > 0 "
            "ORDER BY updated_at DESC, id DESC LIMIT 1) FROM jobs WHERE status = 'queued' AND llm_failures > 0"
        )[0]
        if outage[0]:  # the seconds to the earliest retry, from its time
            outage = (*outage[:2], max(0.0, float(outage[2]) - now), outage[3])
        age = None if oldest is None else max(0.0, now - float(oldest))
        return queue_status(counts, age, int(done_recent), errors, outage)


def _filters(user: str | None, since: float | None, block_ids: Sequence[str] | None) -> tuple[str, list[object]]:
    """The WHERE conditions (each led by AND) of a requeue's optional filters, and their parameters."""
    where = ""
    params: list[object] = []
    if user is not None:
        where += " AND user_id = (SELECT id FROM users WHERE name = ?)"
        params.append(user)
    if since is not None:
        where += " AND updated_at >= ?"
        params.append(since)
    if block_ids is not None:
        where += f" AND block_pk IN (SELECT pk FROM blocks WHERE id IN ({','.join('?' * len(block_ids))}))"
        params.extend(block_ids)
    return where, params


class SqliteQueue(SqliteBase):
    """The extraction queue of a SQLite store, and requeueing a block whose extraction failed."""

    def job_queue(self) -> SqliteJobQueue:
        """The extraction queue kept in this store's file."""
        return SqliteJobQueue(self)

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
            (stored,) = blocks_by_pk(conn, [pk])
        return stored
