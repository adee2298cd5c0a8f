"""The PostgreSQL store through a Citus coordinator against the same store on one plain server
(``memlane bench citus``), side by side in one run.

* ``search_p50_ms_{plain,citus}_{n}`` and ``search_ratio_{n}``: a hybrid search (``Memory.search``, the
  hashing embedder, so the time is the store's) of a user holding ``n`` blocks, the two stores' searches
  alternating query by query so that the machine's load falls on both alike;
* ``add_p50_ms_{plain,citus}`` and ``add_ratio``: one ``Memory.add`` of an exchange, alternating likewise;
* ``ann_*`` (with ``ann_blocks``): a user of that many real conversation exchanges (LongMemEval-S from the data
  folder when it is there, else the LoCoMo that ships, repeated; MiniLM vectors, through the bench's shared
  embedding cache) past the approximate index's threshold on both stores, its index made (on Citus on the
  user's shard: ``ann_build_s_*``): the vector candidates' p50 (``ann_vector_p50_ms_*``, the store's call
  alone, the queries embedded beforehand; alternating) and their recall@10 against the exact scan
  (``ann_recall_at_10_*``, counting a candidate that scores the exact tenth's as found), and the whole
  search's p50 (``ann_search_p50_ms_*``, ``ann_search_ratio``: ``Memory.search``, its queries' vectors made
  beforehand; alternating);
* ``move_*``: a user of ``move_blocks`` blocks isolated into a shard of its own and moved to the other
  worker (online: logical replication) while ``writers`` threads keep adding to that user: the adds
  acknowledged and found afterwards (``move_adds_lost`` must be 0), the adds' p50 before and during the moves,
  the moves' seconds, and whether every search during and after found the user's blocks.

Both stores live in throwaway schemas, dropped at the end. The figures are for a loopback cluster on one
machine: the coordinator's hop costs a loopback round trip here, a network one elsewhere.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memlane.bench.perffilter import fill_real_user, load_real_turns, tie_aware_recall
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.protocol import CachedEmbedder, Embedder
from memlane.core.errors import ConfigError, StoreError
from memlane.core.memory import AddRequest, Memory
from memlane.core.store.candidates.annsettings import DEFAULT_THRESHOLD, EXACT, AnnSettings
from memlane.core.store.candidates.postgres_search import vector_top_blocks
from memlane.core.store.postgres import citus
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.postgres.tenant import user_key
from memlane.core.store.sqlite import SqliteStore

WORDS = (  # noqa: SIM905
    "apple river stone cloud tiger lemon violin garden rocket candle silver harbor meadow pepper lantern falcon "
    "marble orchard velvet thunder bishop compass ember glacier harvest island jasmine kettle ladder mosaic "
    "nectar oyster pebble quarry raven saddle timber umbrella vessel willow yarn zephyr"
).split(" ")


@dataclass(frozen=True)
class CitusBenchSettings:
    sizes: tuple[int, ...] = (100, 5_000)
    queries: int = 60
    adds: int = 60
    move_blocks: int = 10_000
    writers: int = 4
    seed: int = 11
    ann_blocks: int = 0
    data_dir: Path | None = None
    cache_dir: Path | None = None


def _text(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _fill(mem: Memory, user: str, blocks: int, rng: random.Random) -> None:
    batch: list[AddRequest] = []
    for i in range(blocks):
        batch.append(AddRequest(user, [{"role": "user", "content": _text(rng)}], session_id=f"s{i // 50}"))
        if len(batch) == 500:
            mem.add_many(batch)
            batch = []
    if batch:
        mem.add_many(batch)


def _alternate(plain: Callable[[int], object], dist: Callable[[int], object], n: int) -> tuple[float, float]:
    """p50 (ms) of ``plain(i)`` and ``dist(i)`` run alternately ``n`` times each, after one warm-up each."""
    plain(-1)
    dist(-1)
    a: list[float] = []
    b: list[float] = []
    for i in range(n):
        for fn, into in ((plain, a), (dist, b)) if i % 2 == 0 else ((dist, b), (plain, a)):
            t0 = time.perf_counter()
            fn(i)
            into.append((time.perf_counter() - t0) * 1000)
    return statistics.median(a), statistics.median(b)


def run_citus_bench(
    plain_url: str,
    citus_url: str,
    settings: CitusBenchSettings | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    embedder: Embedder | None = None,
) -> dict[str, float]:
    """The figures (module docstring); ``embedder``: the real embedder of the ``ann_*`` figures."""
    cfg = settings or CitusBenchSettings()
    if cfg.ann_blocks > 0 and embedder is None:
        raise ConfigError("the ann_* figures (ann_blocks) need a real embedder")
    rng = random.Random(cfg.seed)
    out: dict[str, float] = {}
    made: list[tuple[str, PostgresStore]] = []

    def open_store(url: str, **kw: object) -> PostgresStore:
        store = PostgresStore(url, schema=f"memlane_bench_{uuid.uuid4().hex[:8]}", **kw)  # type: ignore[arg-type]
        made.append((url, store))
        return store

    try:
        plain = Memory(open_store(plain_url), HashingEmbedder())
        dist = Memory(open_store(citus_url, pool_max=2 * cfg.writers + 2), HashingEmbedder())
        if not getattr(dist.store, "citus", False):
            raise StoreError(f"{citus_url} is not a Citus coordinator")
        for n in cfg.sizes:
            progress(f"users of {n} blocks")
            for mem in (plain, dist):
                _fill(mem, f"user-{n}", n, random.Random(cfg.seed + n))
            queries = [_text(rng, 3) for _ in range(cfg.queries)]
            user = f"user-{n}"

            def searcher(mem: Memory, user: str = user, queries: list[str] = queries) -> Callable[[int], object]:
                return lambda i: mem.search(user, queries[i], k=10)

            p, d = _alternate(searcher(plain), searcher(dist), cfg.queries)
            out[f"search_p50_ms_plain_{n}"], out[f"search_p50_ms_citus_{n}"] = p, d
            out[f"search_ratio_{n}"] = d / p
        progress("adds")
        texts = [_text(rng) for _ in range(cfg.adds + 1)]
        p, d = _alternate(
            lambda i: plain.add("adder", [{"role": "user", "content": texts[i]}]),
            lambda i: dist.add("adder", [{"role": "user", "content": texts[i]}]),
            cfg.adds,
        )
        out["add_p50_ms_plain"], out["add_p50_ms_citus"], out["add_ratio"] = p, d, d / p
        if cfg.ann_blocks > 0:
            assert embedder is not None
            progress(f"a user of {cfg.ann_blocks} real exchanges, with its approximate index")
            ann = AnnSettings(threshold=min(DEFAULT_THRESHOLD, cfg.ann_blocks), background=False)
            stores = (open_store(plain_url, ann=ann), open_store(citus_url, ann=ann, pool_max=2 * cfg.writers + 2))
            out.update(_large_user(stores, embedder, cfg))
        progress(f"a move of a {cfg.move_blocks}-block user under {cfg.writers} writers")
        out.update(_move_under_writers(dist, cfg, rng))
    finally:
        for url, store in made:
            store.close()
            drop_schema(url, store.schema or "")
    return out


def _large_user(
    stores: tuple[PostgresStore, PostgresStore], embedder: Embedder, cfg: CitusBenchSettings
) -> dict[str, float]:
    turns = load_real_turns(cfg.data_dir, cfg.ann_blocks, cfg.queries, cfg.seed)
    cache = SqliteStore(cfg.cache_dir / "embeddings.db") if cfg.cache_dir is not None else None
    try:
        embed = CachedEmbedder(embedder, cache).embed if cache is not None else embedder.embed
        vectors = np.asarray(embed([text for text, _ in turns.exchanges]), dtype=np.float32)
        queries = np.asarray(embed(turns.queries), dtype=np.float32)
    finally:
        if cache is not None:
            cache.close()
    out: dict[str, float] = {"ann_blocks": float(len(turns.exchanges))}
    names = ("plain", "citus")
    for name, store in zip(names, stores, strict=True):
        fill_real_user(store, "large", turns, vectors, embedder.model_id, (), cfg.seed)
        t0 = time.perf_counter()
        state = store.build_index("large").state
        if state != "ready":
            raise StoreError(f"the large user's index on the {name} store is {state}, not ready")
        out[f"ann_build_s_{name}"] = time.perf_counter() - t0
    for name, store in zip(names, stores, strict=True):
        recall = []
        for q in queries:
            got = store.vector_candidates("large", q, 10)
            with store.transaction() as conn:
                want = vector_top_blocks(conn, "large", q, 10, ann=EXACT)
            recall.append(tie_aware_recall(got, want))
        out[f"ann_recall_at_10_{name}"] = statistics.mean(recall)

    def searcher(store: PostgresStore) -> Callable[[int], object]:
        return lambda i: store.vector_candidates("large", queries[i % len(queries)], 10)

    p, d = _alternate(searcher(stores[0]), searcher(stores[1]), cfg.queries)
    out["ann_vector_p50_ms_plain"], out["ann_vector_p50_ms_citus"], out["ann_vector_ratio"] = p, d, d / p
    # The whole search (hybrid, the default), its queries' vectors made beforehand so the time is the store's.
    known = _Known(embedder.model_id, dict(zip(turns.queries, queries, strict=True)))

    def whole(store: PostgresStore) -> Callable[[int], object]:
        mem = Memory(store, known)
        return lambda i: mem.search("large", turns.queries[i % len(turns.queries)], k=10)

    p, d = _alternate(whole(stores[0]), whole(stores[1]), cfg.queries)
    out["ann_search_p50_ms_plain"], out["ann_search_p50_ms_citus"], out["ann_search_ratio"] = p, d, d / p
    return out


@dataclass(frozen=True)
class _Known:
    """An embedder of the texts it was given the vectors of (the large user's queries, embedded beforehand)."""

    model_id: str
    vectors: dict[str, np.ndarray]

    @property
    def dim(self) -> int:
        return int(next(iter(self.vectors.values())).shape[0])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


def _move_under_writers(mem: Memory, cfg: CitusBenchSettings, rng: random.Random) -> dict[str, float]:
    assert isinstance(mem.store, PostgresStore)
    _fill(mem, "mover", cfg.move_blocks, rng)
    cluster = citus.Cluster(mem.store)
    acknowledged: list[str] = []
    latencies: list[tuple[float, float]] = []  # (start, ms)
    refused = 0
    stop = threading.Event()
    lock = threading.Lock()

    def writer(k: int) -> None:
        nonlocal refused
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                ids = mem.add("mover", [{"role": "user", "content": f"writer {k} add {i} {WORDS[i % len(WORDS)]}"}])
                with lock:
                    acknowledged.extend(ids.block_ids)
                    latencies.append((t0, (time.perf_counter() - t0) * 1000))
            except StoreError:
                with lock:
                    refused += 1
            i += 1

    searches_ok = 0
    searches = 0

    def search_check() -> None:
        nonlocal searches_ok, searches
        hits = mem.search("mover", "writer add", k=10)
        searches += 1
        searches_ok += int(len(hits) == 10 and all(h.block.user == "mover" for h in hits))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(cfg.writers)]
    for t in threads:
        t.start()
    try:
        time.sleep(2.0)
        started = time.perf_counter()
        _, node = cluster.where("mover")
        t0 = time.perf_counter()
        shard = cluster.isolate("mover")
        isolate_s = time.perf_counter() - t0
        search_check()
        target = next(n for n in cluster.nodes() if n != node)
        t0 = time.perf_counter()
        cluster.move(shard, target)
        move_s = time.perf_counter() - t0
        ended = time.perf_counter()
        search_check()
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    found = {str(r[0]) for r in mem.store.query("SELECT id FROM blocks WHERE user_id = %s", (user_key("mover"),))}
    search_check()
    before = [ms for t, ms in latencies if t < started]
    during = [ms for t, ms in latencies if started <= t < ended]
    return {
        "move_blocks": float(cfg.move_blocks),
        "move_writers": float(cfg.writers),
        "move_isolate_s": isolate_s,
        "move_move_s": move_s,
        "move_adds_acknowledged": float(len(acknowledged)),
        "move_adds_lost": float(len(set(acknowledged) - found)),
        "move_adds_refused": float(refused),
        "move_add_p50_ms_before": statistics.median(before) if before else 0.0,
        "move_add_p50_ms_during": statistics.median(during) if during else 0.0,
        "move_add_max_ms_during": max(during) if during else 0.0,
        "move_searches_right": float(searches_ok),
        "move_searches": float(searches),
    }


def format_citus_report(figures: dict[str, float]) -> str:
    return "\n".join(f"{name}\t{value:.3f}" for name, value in figures.items())
