"""Extraction commands: ``memlane worker``, ``memlane queue status | retry``, ``memlane llm log``."""

from __future__ import annotations

import json
import sys
import time
from contextlib import closing
from dataclasses import asdict
from pathlib import Path

import click

from memlane.core.calls import own_call_log
from memlane.core.errors import StoreNotFoundError
from memlane.core.extraction.worker import WorkerStats
from memlane.core.jobs import LLMOutage, QueueStatus
from memlane.core.llm import CallLog
from memlane.core.memory import Memory
from memlane.core.timefmt import coerce_time
from memlane.interfaces.cli.app import LLMChoice, call_log_path, llm_options, open_memory, store_options
from memlane.interfaces.cli.options import (
    CONCURRENCY,
    LIMIT,
    WAIT,
    llm_log_option,
    retention_every_option,
    setting_option,
)


@click.command("worker")
@setting_option(
    "--concurrency",
    setting="worker_concurrency",
    type=CONCURRENCY,
    default=4,
    show_default=True,
    help="LLM calls in flight.",
)
@click.option("--drain", is_flag=True, help="Exit when no job is queued or running.")
@setting_option(
    "--lease",
    "lease_s",
    setting="worker_lease",
    type=WAIT,
    default=120.0,
    show_default=True,
    help="Seconds a claimed job is leased; a heartbeat extends it.",
)
@click.option("--poll", "poll_s", type=WAIT, default=1.0, show_default=True, help="Seconds between empty polls.")
@retention_every_option("Seconds between retention sweeps (the first when the worker starts); 0: none.")
@store_options
@llm_options
def worker_cmd(
    concurrency: int,
    drain: bool,
    lease_s: float,
    poll_s: float,
    retention_every_s: float,
    store: Path,
    embedder: str,
    llm: LLMChoice,
) -> None:
    """Run extraction jobs from the store's queue until stopped (SIGTERM/Ctrl-C finish the jobs in flight),
    and the retention sweep every --retention-every seconds (`memlane retention`).

    An LLM that cannot be reached uses up no job's attempts: the jobs wait for it (10 s, then longer, up to
    5 minutes between tries) and `memlane queue status` shows the outage. --drain ends when the queue is
    empty, or when the LLM cannot be reached (exit 1; the jobs stay queued for a later run).

    The store must exist (`memlane init` or a first add creates it): a worker on a mistyped path exits 3
    instead of waiting forever on an empty queue.

    \b
    Example:
      MEMLANE_LLM_BASE_URL=http://127.0.0.1:8765/v1 MEMLANE_LLM_API_KEY=x MEMLANE_LLM_MODEL=local \\
        memlane worker --concurrency 2 --drain
    """
    with closing(open_memory(store, embedder, llm)) as mem:
        worker = mem.worker(
            concurrency=concurrency, lease_s=lease_s, poll_s=poll_s, retention_every_s=retention_every_s
        )
        worker.install_signal_handlers()

        def progress(stats: WorkerStats) -> None:
            click.echo(
                f"done {stats.done}  retried {stats.retried}  dead {stats.dead}  lost {stats.lost}  "
                f"waiting for the LLM {stats.waited}",
                err=True,
            )

        stats = worker.run(drain=drain, on_progress=progress)
    counts = {k: v for k, v in asdict(stats).items() if k not in ("errors", "sweep_errors")}
    click.echo(json.dumps(counts | {"crashes": len(stats.errors), "failed_sweeps": len(stats.sweep_errors)}))
    if stats.llm_unreachable:
        click.echo(
            "error: the LLM could not be reached: the jobs stay queued with their attempts (`memlane queue "
            "status` shows them); run the worker again once it is back.",
            err=True,
        )
    if stats.errors or stats.sweep_errors or stats.llm_unreachable:
        sys.exit(1)


@click.group("queue")
def queue_group() -> None:
    """The extraction queue."""


@queue_group.command("status")
@click.option("--json", "as_json", is_flag=True)
@store_options
def queue_status_cmd(as_json: bool, store: Path, embedder: str) -> None:
    """Counts by status, age of the oldest queued job, throughput and the last errors.

    \b
    Example:
      memlane queue status --json
    """
    with closing(open_memory(store, embedder)) as mem:
        st = mem.queue_status()
    if as_json:
        click.echo(json.dumps(status_json(st)))
        return
    click.echo(f"queued {st.queued}  running {st.running}  done {st.done}  dead {st.dead}")
    if st.llm_outage is not None:
        click.echo(outage_line(st.llm_outage))
    if st.oldest_queued_age_s is not None:
        click.echo(f"oldest queued job: {st.oldest_queued_age_s:.0f} s")
    click.echo(f"throughput: {st.throughput_per_min:.1f} jobs/min (last 5 min)")
    for e in st.last_errors:
        click.echo(f"job {e.job_id} ({e.status}, attempt {e.attempts}) {e.user}/{e.block_id}: {e.error[:200]}")
    if st.dead:
        click.echo(f"`memlane queue retry --dead` queues the {st.dead} dead jobs again")


def status_json(st: QueueStatus) -> dict[str, object]:
    """``memlane queue status --json``: the counts, the last errors and the LLM outage (null: none)."""
    outage = st.llm_outage
    return {
        "queued": st.queued,
        "running": st.running,
        "done": st.done,
        "dead": st.dead,
        "oldest_queued_age_s": st.oldest_queued_age_s,
        "throughput_per_min": st.throughput_per_min,
        "last_errors": [asdict(e) for e in st.last_errors],
        "llm_outage": None if outage is None else asdict(outage) | {"waiting_s": max(0.0, time.time() - outage.since)},
    }


def outage_line(outage: LLMOutage) -> str:
    waited = max(0.0, time.time() - outage.since)
    return (
        f"LLM unreachable: {outage.jobs} queued jobs wait for it (for {waited:.0f} s; next try in "
        f"{outage.next_try_in_s:.0f} s; their attempts are kept); last error: {outage.last_error[:200]}"
    )


@queue_group.command("retry")
@click.option("--user", default=None, help="Only this user's jobs.")
@click.option("--since", default=None, help="Only jobs that failed (or died) at or after this time.")
@click.option(
    "--dead",
    "dead_only",
    is_flag=True,
    help="Only the dead jobs (by default also the queued jobs waiting out a backoff after a failure).",
)
@click.option("--json", "as_json", is_flag=True)
@store_options
def queue_retry_cmd(
    user: str | None, since: str | None, dead_only: bool, as_json: bool, store: Path, embedder: str
) -> None:
    """Run failed extraction jobs again: the dead jobs are queued again with their attempts reset (their
    blocks back to extraction status queued), and the queued jobs waiting out a backoff after a failure (an
    unreachable LLM, an unusable reply) run at the next claim. Running and done jobs are left alone; running
    it twice does nothing the second time.

    \b
    Example:
      memlane queue retry --dead
      memlane queue retry --user alice --since 2024-05-01T00:00:00Z --json
    """
    clock = coerce_time(since, where="--since")
    with closing(open_memory(store, embedder)) as mem:
        done = mem.requeue(user=user, since=clock, dead_only=dead_only)
    if as_json:
        click.echo(json.dumps({"dead": done.dead, "waiting": done.waiting}))
        return
    click.echo(f"queued again: {done.dead} dead jobs (attempts reset); run now: {done.waiting} waiting jobs")


@click.group("llm")
def llm_group() -> None:
    """The LLM call log (also the response cache)."""


@llm_group.command("log")
@click.option("-n", "n", type=LIMIT, default=20, show_default=True, help="How many of the latest calls.")
@click.option("--json", "as_json", is_flag=True)
@llm_log_option("Call log file. Default: STORE with .calls.db.")
@store_options
def llm_log_cmd(n: int, as_json: bool, llm_log: Path | None, store: Path, embedder: str) -> None:
    """List the latest LLM calls: model, purpose, tokens, latency, cache hits, ignored reply keys, errors.

    ignored_keys counts the properties of a JSON reply that were not asked for and were dropped (the rest of
    the reply was used).

    \b
    Example:
      memlane llm log -n 5 --json
    """
    path = call_log_path(store, llm_log)
    if path is None:  # a PostgreSQL store: its call log is a table of the store
        opened = Memory.open_store(str(store), create=False)
        try:
            log = own_call_log(opened)
            records = [] if log is None else log.list(n)
        finally:
            opened.close()
    else:
        if not path.is_file():
            raise StoreNotFoundError(f"no LLM call log at {path}")
        file_log = CallLog(path)
        try:
            records = file_log.list(n)
        finally:
            file_log.close()
    if as_json:
        click.echo(json.dumps([asdict(r) for r in records], default=str))
        return
    for r in records:
        d = asdict(r)
        click.echo(
            "  ".join(
                f"{k}={d[k]}"
                for k in (
                    "id",
                    "model",
                    "purpose",
                    "tokens_in",
                    "tokens_out",
                    "latency_ms",
                    "cached",
                    "ignored_keys",
                    "error",
                )
                if k in d
            )
        )


def register(group: click.Group) -> None:
    for cmd in (worker_cmd, queue_group, llm_group):
        group.add_command(cmd)
