"""What a retention sweep costs: one user's expired blocks deleted by a sweep, side by side with the same
number deleted one call of ``Memory.delete`` each (the per-block path), on identical stores, alternating.

    .venv/bin/python scripts/retention_sweep.py [--blocks 4000] [--rounds 2] [--postgres URL]

Prints, per store engine and round, the seconds each way and the sweep's blocks per second, plus the
ratio (per-block deletes / sweep) of each round: compare within one run only (the machine is shared).
The hashing test embedder keeps ingest cheap; a sweep does not embed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.retention import RetentionPolicy
from memlane.core.store.protocol import Store

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def filled(make: Callable[[], Store], blocks: int) -> Memory:
    """A store with one user of ``blocks`` blocks (single perspective), one session of 10 per day: the
    first half older than 30 days before the clock below, the second half newer."""
    mem = Memory(make(), HashingEmbedder())
    days = blocks // 10
    for d in range(days):
        turns = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"day {d} line {i} about topic{(d * 7 + i) % 97}",
            }
            for i in range(20)
        ]
        mem.add("alice", turns, session_id=f"s{d}", time=T0 + timedelta(days=d), perspective="single")
    mem.add("bob", [{"role": "user", "content": "bob's own line"}], time=T0)
    return mem


def clock(blocks: int) -> datetime:
    return T0 + timedelta(days=blocks // 20 + 30)  # the first half of the days are more than 30 days old


def sweep(mem: Memory, blocks: int) -> tuple[float, int]:
    mem.set_retention("alice", RetentionPolicy(max_age_days=30))
    start = time.perf_counter()
    report = mem.apply_retention(now=clock(blocks), user="alice")
    return time.perf_counter() - start, report.expired


def one_by_one(mem: Memory, blocks: int) -> tuple[float, int]:
    cutoff = clock(blocks) - timedelta(days=30)
    old = [b.id for b in mem.list("alice", limit=10_000) if b.event_time < cutoff]
    start = time.perf_counter()
    for block_id in old:
        mem.delete("alice", block_id)
    return time.perf_counter() - start, len(old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres", default=None, help="also measure a PostgreSQL store at this URL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        engines: dict[str, Callable[[], Store]] = {}
        from memlane.core.store.sqlite import SqliteStore

        engines["sqlite"] = lambda: SqliteStore(Path(folder) / f"{uuid.uuid4().hex}.db", durability="normal")
        schemas: list[str] = []
        if args.postgres:
            from memlane.core.store.postgres.store import PostgresStore

            def make_pg() -> Store:
                schemas.append(f"bench_{uuid.uuid4().hex[:12]}")
                return PostgresStore(args.postgres, schema=schemas[-1], durability="normal")

            engines["postgres"] = make_pg
        for name, make in engines.items():
            for r in range(args.rounds):
                results = {}
                # Alternate which way goes first, so neither always runs on a warmer machine.
                for how in ("sweep", "one_by_one") if r % 2 == 0 else ("one_by_one", "sweep"):
                    mem = filled(make, args.blocks)
                    try:
                        results[how] = (sweep if how == "sweep" else one_by_one)(mem, args.blocks)
                        assert mem.store.integrity_check() == []
                    finally:
                        mem.close()
                (s_time, s_n), (o_time, o_n) = results["sweep"], results["one_by_one"]
                assert s_n == o_n, (s_n, o_n)
                print(
                    f"{name} round {r + 1}: {s_n} of {args.blocks} blocks expired; sweep {s_time:.3f} s "
                    f"({s_n / s_time:,.0f} blocks/s), one delete each {o_time:.3f} s; ratio {o_time / s_time:.1f}x"
                )
        if args.postgres:
            from memlane.core.store.postgres.schema import drop_schema

            for schema in schemas:
                drop_schema(args.postgres, schema)


if __name__ == "__main__":
    main()
