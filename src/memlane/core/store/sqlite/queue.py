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
from memlane.core.jobs import ClaimedJob, ExtractionResult, JobError, JobStatus, QueueStatus
from memlane.core.model import ExtractionStatus, content_hash
from memlane.core.store.rows import BLOCK_COLUMNS, row_to_block
from memlane.core.store.sqlite.keys import delete_keys, insert_keys
from memlane.core.store.sqlite.store import SqliteStore
from memlane.core.timefmt import now_utc, to_epoch

# A job row is the claimed job only while its block is still the claimed block: SQLite hands out the ids of
# deleted rows again (a deleted user's newest jobs and blocks), so a worker that claimed a job of a user
# deleted meanwhile must not write into a job and block that now carry another user's ids. Block ids
# (random, time-ordered) are never reused.
SAME_BLOCK = "block_pk = ? AND EXISTS (SELECT 1 FROM blocks b WHERE b.pk = jobs.block_pk AND b.id = ?)"


def _now() -> float:
    return to_epoch(now_utc())


class SqliteJobQueue:
    """:class:`~memlane.core.jobs.JobQueue` over a :class:`SqliteStore`."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def claim(self, owner: str, n: int, lease_s: float, *, job_ids: Sequence[int] | None = None) -> list[ClaimedJob]:
        """Lease up to ``n`` ready jobs (or only those of ``job_ids``) to ``owner`` for ``lease_s`` seconds."""
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
                "RETURNING id, block_pk, attempts, max_attempts",
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
        return [
            ClaimedJob(
                job_id=int(r[0]),
                owner=owner,
                attempts=int(r[2]),
                max_attempts=int(r[3]),
                block=blocks[int(r[1])],
                block_ref=int(r[1]),
            )
            for r in sorted(rows)
            if int(r[1]) in blocks
        ]

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
                "UPDATE blocks SET extraction_status = ? WHERE pk = ?",
                [(ExtractionStatus.FAILED.value, r[0]) for r in dead],
            )
        conn.execute(
            "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, updated_at = ? "
            "WHERE status = 'running' AND lease_until < ?",
            (now, now),
        )

    def extend(self, owner: str, job_ids: Sequence[int], lease_s: float) -> int:
        """Heartbeat: push the lease of ``owner``'s running jobs ``lease_s`` seconds ahead."""
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
        self,
        job: ClaimedJob,
        result: ExtractionResult,
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
    ) -> bool:
        """Write summary, facts and their keys, and mark the job done, in one transaction. ``vectors`` are
        the embeddings of ``[summary, *facts]``. Returns False (writing nothing) if the lease was lost."""
        now = _now()
        texts = [result.summary, *result.facts]
        kinds = ["summary"] + ["fact"] * len(result.facts)
        with self.store.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_until = NULL, finished_at = ?, "
                f"updated_at = ? WHERE id = ? AND status = 'running' AND lease_owner = ? AND {SAME_BLOCK}",
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
        """Record a failed attempt: back to the queue after ``retry_in_s``, or dead after the last attempt.
        Returns the new status, or None if the lease was lost (another worker owns the job now)."""
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
                "raw_response = ?, updated_at = ?, finished_at = ? WHERE id = ?",
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
            if dead:
                conn.execute(
                    "UPDATE blocks SET extraction_status = ? WHERE pk = ?",
                    (ExtractionStatus.FAILED.value, job.block_ref),
                )
        return status

    def statuses(self, job_ids: Sequence[int]) -> dict[int, JobStatus]:
        """The status of each of ``job_ids`` that still exists (a deleted user's jobs do not)."""
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
        return QueueStatus(
            queued=counts.get("queued", 0),
            running=counts.get("running", 0),
            done=counts.get("done", 0),
            dead=counts.get("dead", 0),
            oldest_queued_age_s=None if oldest is None else max(0.0, now - float(oldest)),
            done_last_5_min=int(done_recent),
            last_errors=tuple(
                JobError(
                    job_id=int(r[0]),
                    block_id=str(r[1]),
                    user=str(r[2]),
                    status=JobStatus(r[3]),
                    attempts=int(r[4]),
                    error=str(r[5]),
                    at=float(r[6]),
                )
                for r in errors
            ),
        )
