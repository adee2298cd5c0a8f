"""Add throughput of a store on one PostgreSQL server against the same load sharded over two.

    .venv/bin/python scripts/bench_shards.py postgresql://host1/db postgresql://host2/db \\
        --users 500 --threads 8 --seconds 10 --rounds 3

Each round runs ``--threads`` adders for ``--seconds`` against a fresh store, first on the first server
alone (a plain PostgresStore), then sharded over both (a ShardedStore); rounds alternate so that a change
of the machine's load hits both alike. Every add is one user (chosen at random among ``--users``) storing
one exchange with the test embedder (hashing: no model time, so the store's part is what is measured).
Prints adds/s per round and the ratio two/one. The stores live in schemas of their own on each server,
dropped at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable

import psycopg
from psycopg import sql

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.sharded import ShardedStore
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.protocol import Store

WORDS = [
    "garden", "tomato", "Lisbon", "cello", "bike", "coffee", "trip", "Japan", "novel", "marathon", "recipe",
    "river", "camera", "chess",
]  # fmt: skip


def run_round(store: Store, users: list[str], threads: int, seconds: float, seed: int) -> float:
    mem = Memory(store, HashingEmbedder())
    for user in users:  # every user exists before the clock starts
        mem.add(user, [{"role": "user", "content": "hello"}])
    done = [0] * threads
    stop = threading.Event()

    def adder(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        while not stop.is_set():
            text = " ".join(rng.choices(WORDS, k=12))
            mem.add(rng.choice(users), [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])
            done[k] += 1

    workers = [threading.Thread(target=adder, args=(k,)) for k in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    return sum(done) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("first", help="URL of the first server (the one-shard runs use it alone)")
    parser.add_argument("second", help="URL of the second server")
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    users = [f"user-{i:05d}" for i in range(args.users)]
    made: list[str] = []

    def schema() -> str:
        made.append(f"bench_{uuid.uuid4().hex[:12]}")
        for url in (args.first, args.second):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(made[-1])))
        return made[-1]

    pool = args.threads + 2
    setups: dict[str, Callable[[], Store]] = {
        "one": lambda: PostgresStore(args.first, schema=schema(), pool_max=pool),
        "two": lambda: ShardedStore([args.first, args.second], schema=schema(), pool_max=pool),
    }
    rates: dict[str, list[float]] = {"one": [], "two": []}
    print(f"{args.users} users, {args.threads} adder threads, {args.seconds:g} s a round, alternating")
    try:
        for rnd in range(args.rounds):
            for name, setup in setups.items():
                store = setup()
                try:
                    rate = run_round(store, users, args.threads, args.seconds, rnd)
                finally:
                    store.close()
                rates[name].append(rate)
                print(f"round {rnd + 1}  {name} shard{'s' if name == 'two' else ''}: {rate:8.1f} adds/s", flush=True)
    finally:
        for name in made:
            for url in (args.first, args.second):
                drop_schema(url, name)
    one, two = statistics.median(rates["one"]), statistics.median(rates["two"])
    print(f"median: one shard {one:.1f} adds/s, two shards {two:.1f} adds/s, two/one = {two / one:.2f}")


if __name__ == "__main__":
    main()
