"""How AsyncMemory behaves under concurrent searches, side by side with the synchronous Memory.

    .venv/bin/python scripts/bench_async.py [--users 10] [--exchanges 200] [--searches 80] [--rounds 3]

Builds a SQLite store in a temporary folder, or fills the PostgreSQL store at ``--store`` (its ``user-N``
users are replaced), with memlane's default embedder; then, in each round and in
alternating order, runs the same searches: one after another with Memory called on the event loop (the
wrong way: it blocks the loop), and concurrently through AsyncMemory with 1, 2 and 4 threads. Prints, per
variant, the median over rounds of the wall time, searches per second, and what a task sleeping 5 ms in a
loop saw meanwhile: how many of the ticks it could have made it made, and its longest gap.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from memlane import AsyncMemory
from memlane.core.memory import AddRequest, Memory

TICK_S = 0.005
TOPICS = ["a trip to Lisbon", "a new job at the bakery", "the dog called Rex", "a peanut allergy", "jazz concerts"]


async def watched(work: Callable[[], Awaitable[None]]) -> tuple[float, float, float]:
    """(seconds, share of possible ticks made, longest gap between ticks in ms) while ``work`` runs."""
    ticks, gap, done = 0, 0.0, asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks, gap
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            gap, last, ticks = max(gap, now - last), now, ticks + 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    await work()
    elapsed = time.perf_counter() - start
    done.set()
    await task
    return elapsed, min(1.0, ticks * TICK_S / elapsed), gap * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--exchanges", type=int, default=200)
    parser.add_argument("--searches", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", help="a postgresql:// URL to measure there (default: SQLite in a temporary folder)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        memory = Memory.open(args.store or Path(folder) / "bench.db")
        for info in memory.users():
            if info.name.startswith("user-"):
                memory.delete_user(info.name)
        started = time.perf_counter()
        for u in range(args.users):
            requests = [
                AddRequest(
                    f"user-{u}",
                    [
                        {
                            "role": "user",
                            "content": f"Note {i} of user {u}: we talked about {TOPICS[i % len(TOPICS)]}.",
                        },
                        {"role": "assistant", "content": f"I will remember item {i}."},
                    ],
                    session_id=f"s{i // 10}",
                )
                for i in range(args.exchanges)
            ]
            memory.add_many(requests)
        print(f"store: {args.users} users x {args.exchanges} exchanges, built in {time.perf_counter() - started:.1f} s")
        queries = [
            (f"user-{i % args.users}", f"What did user {i % args.users} say about {TOPICS[i % len(TOPICS)]}?")
            for i in range(args.searches)
        ]
        pools = {n: AsyncMemory(memory, max_workers=n) for n in (1, 2, 4)}

        def sync_on_loop() -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                for user, query in queries:
                    memory.search(user, query, k=10)

            return run

        def concurrent(amem: AsyncMemory) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                await asyncio.gather(*(amem.search(user, query, k=10) for user, query in queries))

            return run

        def idle() -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                await asyncio.sleep(1.0)

            return run

        variants: dict[str, Callable[[], Callable[[], Awaitable[None]]]] = {
            "idle loop (calibration)": idle,
            "Memory on the loop": sync_on_loop,
        }
        for n, amem in pools.items():
            variants[f"AsyncMemory, {n} thread{'s' if n > 1 else ''}"] = functools.partial(concurrent, amem)
        results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}

        async def rounds() -> None:
            await concurrent(pools[4])()  # warm the caches once
            for r in range(args.rounds):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for name in order:
                    results[name].append(await watched(variants[name]()))

        asyncio.run(rounds())
        print(f"{args.searches} searches (k=10, hybrid), median of {args.rounds} rounds in alternating order")
        print("(the idle loop sleeps 1 s instead: the share of ticks a loop with nothing to do makes here)")
        print(f"{'variant':<26} {'seconds':>8} {'searches/s':>11} {'ticks made':>11} {'longest gap ms':>15}")
        for name, runs in results.items():
            secs = statistics.median(r[0] for r in runs)
            share = statistics.median(r[1] for r in runs)
            gap = statistics.median(r[2] for r in runs)
            rate = "" if name.startswith("idle") else f"{args.searches / secs:.0f}"
            print(f"{name:<26} {secs:>8.2f} {rate:>11} {share:>10.0%} {gap:>15.0f}")
        memory.close()


if __name__ == "__main__":
    main()
