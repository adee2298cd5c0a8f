"""The memory model's costs on a PostgreSQL store: an update against an add, filtered searches against the
unfiltered search, with the recall of the filtered top 10 against the exact filtered answer.

    .venv/bin/python scripts/bench_pg_model.py postgresql://host/db --blocks 20000 --ops 100 [--ann 0]

One user of ``--blocks`` fact blocks (chat-like sentences, the hashing test embedder, no extraction), every
block annotated ``p01``, ``p10``, ``p50`` (value ``y``) for 1%, 10% and 50% of them (nested: a block with
``p01`` has the other two). Then, interleaved: ``--ops`` adds of one
fact and updates of an existing fact's text (p50 of each, and their ratio); ``--ops`` vector searches
unfiltered and filtered to each share (p50 and ratio to the unfiltered p50), and the recall at 10 of each
filtered search against the exact filtered top 10 (the same store's exact scan, restricted by the
filter). ``--ann 0`` puts the user past the ANN threshold (its HNSW index built before measuring).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid

from memlane.bench.perf import _OBJECTS, _SUBJECTS, _VERBS, sentence
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore

SHARES = {"p01": 0.01, "p10": 0.10, "p50": 0.50}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--blocks", type=int, default=20_000)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--ann", type=int, default=None, help="ANN threshold (default: exact only)")
    args = parser.parse_args()
    schema = f"bench_model_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(args.url, schema=schema, ann=AnnSettings(threshold=args.ann, background=False))
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(3)
    try:
        per_add = 500
        for start in range(0, args.blocks, per_add):
            n = min(per_add, args.blocks - start)
            groups: dict[tuple[str, ...], list[str]] = {}
            for i in range(n):
                s = rng.random()
                levels = tuple(level for level, share in SHARES.items() if s < share)
                groups.setdefault(levels, []).append(sentence(rng, start + i))
            for levels, texts in groups.items():  # one add per annotation set
                mem.add_facts("u", texts, session_id=f"s{start // per_add}", annotations=dict.fromkeys(levels, "y"))
        with store.transaction() as conn:
            conn.execute("ANALYZE")
        if args.ann is not None:
            store.build_index("u")
        total = store.count_blocks("u")
        ids = [b.id for b in store.list_blocks("u", limit=2000)]
        adds, updates = [], []
        for i in range(args.ops):
            t = time.perf_counter()
            mem.add_facts("u", [sentence(rng, 10_000_000 + i)], session_id="ops")
            adds.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            mem.update("u", rng.choice(ids), content=sentence(rng, 20_000_000 + i))
            updates.append((time.perf_counter() - t) * 1000)
        add, update = statistics.median(adds), statistics.median(updates)
        print(f"{total} blocks, ANN threshold {args.ann}")
        print(f"add p50 {add:.2f} ms, update p50 {update:.2f} ms, ratio {update / add:.2f}")
        queries = [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}" for _ in range(args.ops)]
        filters = {level: Filters(annotations={level: "y"}) for level in SHARES}
        times: dict[str, list[float]] = {"none": [], **{level: [] for level in SHARES}}
        recall: dict[str, list[float]] = {level: [] for level in SHARES}
        emb = HashingEmbedder()
        for q in queries:
            qv = emb.embed([q])[0]
            for level in ("none", *SHARES):
                f = None if level == "none" else filters[level]
                t = time.perf_counter()
                got = store.vector_candidates("u", qv, 10, filters=f)
                times[level].append((time.perf_counter() - t) * 1000)
                if f is not None:
                    with store.transaction() as conn:  # the exact filtered answer: a scan, no index
                        conn.execute("SET LOCAL enable_indexscan = off")
                        conn.execute("SET LOCAL enable_bitmapscan = off")
                        exact = conn.execute(
                            "SELECT v.block_pk, v.embedding <#> %s::vector AS d FROM key_vectors v JOIN blocks b "
                            "ON b.user_id = v.user_id AND b.pk = v.block_pk JOIN users u ON u.id = v.user_id "
                            "WHERE u.name = 'u' AND b.annotations @> %s::jsonb ORDER BY d LIMIT 10",
                            ("[" + ",".join(map(str, qv.tolist())) + "]", f'{{"{level}": "y"}}'),
                        ).fetchall()
                    want = {int(r[0]) for r in exact}
                    recall[level].append(len(want & {r for r, _ in got}) / max(1, len(want)))
        base = statistics.median(times["none"])
        print(f"vector search p50: unfiltered {base:.2f} ms")
        for level, share in SHARES.items():
            p50 = statistics.median(times[level])
            print(
                f"  annotation filter keeping {share:.0%}: p50 {p50:.2f} ms ({p50 / base:.2f}x), "
                f"recall@10 {statistics.mean(recall[level]):.4f}"
            )
    finally:
        mem.close()
        drop_schema(args.url, schema)


if __name__ == "__main__":
    main()
