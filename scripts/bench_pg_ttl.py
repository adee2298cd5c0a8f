"""What per-block TTLs cost a PostgreSQL search: p50 latencies of one 10k-block user, side by side.

    .venv/bin/python scripts/bench_pg_ttl.py postgresql://host/db --blocks 10000 --queries 200 --rounds 3 \\
        [--baseline-src DIR]

Stores (each in a schema of its own, dropped at the end), filled alike (one user, ``--blocks`` exchanges of
random words, the hashing test embedder, no extraction):

- ``baseline``: written and searched by another memlane's code (``--baseline-src``: the ``src`` directory of
  a checkout from before TTLs, e.g. ``git archive <ref> src | tar -x -C /tmp/old``), when given;
- ``no_ttl``: this code, no block with a TTL (every read probes the empty expiry index);
- ``all_ttl``: this code, every block with a TTL of a day (none expired);
- ``expired_1pct``: this code, 1% of the blocks expired and not swept yet (searches leave them out).

Each round measures every store in turn, in a process of its own (so each runs its own code), ``--queries``
searches per mode (vector, keyword, hybrid) after a warm-up; the table shows each store's median over
rounds of its p50, and the ratio to ``no_ttl`` (or to ``baseline``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid

MODES = ("vector", "keyword", "hybrid")


def _load(url: str, schema: str, blocks: int, variant: str) -> None:
    from memlane.bench.perf import sentence
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.memory import Memory
    from memlane.core.store.postgres.store import PostgresStore

    store = PostgresStore(url, schema=schema)
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(1)
    per_add = 500
    for start in range(0, blocks, per_add):
        turns = []
        for i in range(start, min(start + per_add, blocks)):
            turns.append({"role": "user", "content": sentence(rng, 2 * i)})
            turns.append({"role": "assistant", "content": sentence(rng, 2 * i + 1)})
        mem.add("u", turns, session_id=f"s{start // per_add}", perspective="single", extract="off")
    now = time.time()
    if variant == "all_ttl":
        store.set_ttl("u", 86400, now=now)  # type: ignore[attr-defined]
    elif variant == "expired_1pct":
        ids = [b.id for b in store.list_blocks("u", limit=blocks)][::100]
        store.set_ttl("u", 1, block_ids=ids, now=now - 10)  # type: ignore[attr-defined]
    with store.transaction() as conn:
        conn.execute("ANALYZE")
    mem.close()


def _measure(url: str, schema: str, queries: int) -> dict[str, float]:
    from memlane.bench.perf import _OBJECTS, _SUBJECTS, _VERBS
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.memory import Memory
    from memlane.core.store.postgres.store import PostgresStore

    mem = Memory(PostgresStore(url, schema=schema, create=False), HashingEmbedder())
    rng = random.Random(2)
    texts = [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}" for _ in range(queries)]
    out = {}
    for mode in MODES:
        for text in texts[:20]:  # warm-up
            mem.search("u", text, k=10, mode=mode)
        times = []
        for text in texts:
            t = time.perf_counter()
            mem.search("u", text, k=10, mode=mode)
            times.append((time.perf_counter() - t) * 1000)
        out[mode] = statistics.median(times)
    mem.close()
    return out


def _run(src: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{args[0]} failed:\n{done.stderr}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-src")
    parser.add_argument("--_load", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--_measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._load:
        _load(args.url, args._load[0], args.blocks, args._load[1])
        return
    if args._measure:
        print(json.dumps(_measure(args.url, args._measure, args.queries)))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the schemas are dropped on a kill too
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    variants = {"no_ttl": here, "all_ttl": here, "expired_1pct": here}
    if args.baseline_src:
        variants = {"baseline": args.baseline_src, **variants}
    schemas = {v: f"bench_ttl_{uuid.uuid4().hex[:10]}" for v in variants}
    try:
        for v, src in variants.items():
            _run(src, args.url, "--blocks", str(args.blocks), "--_load", schemas[v], v)
        results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for r in range(args.rounds):
            for v, src in variants.items():
                out = _run(src, args.url, "--queries", str(args.queries), "--_measure", schemas[v])
                results[v].append(json.loads(out))
                print(f"round {r + 1} {v}: {out.strip()}", flush=True)
        reference = "baseline" if args.baseline_src else "no_ttl"
        p50 = {v: {m: statistics.median(r[m] for r in rs) for m in MODES} for v, rs in results.items()}
        print(f"search p50 (ms) of one {args.blocks}-block user, median of {args.rounds} rounds; ratio to {reference}")
        print(f"{'store':<14}" + "".join(f"{m:>20}" for m in MODES))
        for v in variants:
            cells = "".join(f"{p50[v][m]:>10.2f} ({p50[v][m] / p50[reference][m]:.2f}x)" for m in MODES)
            print(f"{v:<14}{cells}")
    finally:
        sys.path.insert(0, here)
        from memlane.core.store.postgres.schema import drop_schema

        for schema in schemas.values():
            drop_schema(args.url, schema)


if __name__ == "__main__":
    main()
