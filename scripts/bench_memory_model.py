"""What the memory model costs on the SQLite store: an update in place against an add, and an unfiltered
search with and without the TTL check.

    .venv/bin/python scripts/bench_memory_model.py --blocks 5000 20000

For each size, a fresh store in a temporary folder gets that many fact blocks (in adds of 500) with the
test embedder (hashing: no model time, so the store's part is what is measured). Then 300 pairs, each an
add of one new fact and an update of a random existing block with new text, timed side by side; then 300
hybrid searches, each run with the TTL check and without it (the expired-blocks query replaced by an empty
answer), in alternating order (a query's second search reuses the first's term lookup). Prints the p50s
and their ratios (docs/scaling.md, section 6).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.candidates import sqlite as candidates_sqlite
from memlane.core.store.sqlite import SqliteStore

WORDS = "apple river stone cloud piano tiger lamp ocean maple violin garden coffee train winter summer city book"


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def measure(blocks: int, pairs: int, seed: int) -> None:
    rng = random.Random(seed)
    words = WORDS.split()

    def text(i: int) -> str:
        return f"fact {i}: " + " ".join(rng.choice(words) for _ in range(12))

    with tempfile.TemporaryDirectory() as folder:
        mem = Memory(SqliteStore(Path(folder) / "bench.db"), HashingEmbedder())
        try:
            for start in range(0, blocks, 500):
                batch = [text(i) for i in range(start, min(blocks, start + 500))]
                mem.add_facts("u", batch, session_id=f"s{start // 500}")
            ids = [b.id for b in mem.list("u", limit=10_000)]
            adds: list[float] = []
            updates: list[float] = []
            for i in range(pairs):
                t0 = time.perf_counter()
                mem.add_facts("u", [text(blocks + i)], session_id="new")
                adds.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                mem.update("u", ids[rng.randrange(len(ids))], content=text(2 * blocks + i))
                updates.append(time.perf_counter() - t0)
            print(
                f"{blocks} blocks: add p50 {p50_ms(adds):.2f} ms, update p50 {p50_ms(updates):.2f} ms, "
                f"update/add {p50_ms(updates) / p50_ms(adds):.2f}"
            )
            queries = [" ".join(rng.sample(words, 3)) for _ in range(pairs)]
            for q in queries[:20]:
                mem.search("u", q, k=10)
            real = candidates_sqlite.expired_block_pks

            def none(*_: object) -> list[int]:
                return []

            timed: dict[Callable[..., list[int]], list[float]] = {real: [], none: []}
            try:
                for i, q in enumerate(queries):
                    for check in (real, none) if i % 2 else (none, real):
                        candidates_sqlite.expired_block_pks = check  # type: ignore[assignment]
                        t0 = time.perf_counter()
                        mem.search("u", q, k=10)
                        timed[check].append(time.perf_counter() - t0)
            finally:
                candidates_sqlite.expired_block_pks = real
            with_check, without = p50_ms(timed[real]), p50_ms(timed[none])
            print(
                f"{blocks} blocks: hybrid search p50 {with_check:.2f} ms with the TTL check, {without:.2f} ms "
                f"without, ratio {with_check / without:.3f}"
            )
        finally:
            mem.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for n in args.blocks:
        measure(n, args.pairs, args.seed)


if __name__ == "__main__":
    main()
