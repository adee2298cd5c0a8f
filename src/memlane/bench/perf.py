"""Performance benchmark of the memory core on the embedded default (``memlane bench perf``).

What it measures, in one run, with the real embedder:

* ``embedder_sentences_per_s``: the embedder alone on distinct exchange texts shaped exactly like the
  blocks of the bulk ingest below (``user: ...`` and ``assistant: ...`` lines), so the two rates compare;
* ``ingest_p50_ms`` / ``ingest_p95_ms``: one ``Memory.add`` of one exchange (user message and reply) in
  dual mode, end to end: validation, embedding, the durable commit;
* ``bulk_blocks_per_s``: ``Memory.add_many`` over sessions of distinct exchanges in single mode (one
  embedding per block, so it is directly comparable with the embedder's own rate);
* ``search_p50_ms_{1k,10k,100k}`` (and p95): a hybrid search (query embedding, vector top-k, BM25,
  fusion, fetching the blocks) in users holding that many blocks, after one warm-up query per user, and
  each stage on its own with the approximate index's recall against the exact scan
  (:mod:`memlane.bench.perfcurve`); per size also the time to build the user (``build_s_*``) and its
  index (``ann_build_s_*``, at the warm-up), and ``ingest_p50_ms_*``: an add into that user;
* ``search_current_p50_ms_{10k,100k}`` (and ``search_current_no_supersede_*``, their ratio
  ``supersede_current_ratio_*``, and ``current_newest_first*``): per large user, after the figures above,
  ten facts told three times each with a changing value ("I have 4 bikes in the garage now.") and the
  questions about their current values ("How many bikes do I have now?"), the searches that reach
  supersession's value test, searched with and without supersession alternately
  (:func:`memlane.bench.perfcurve.measure_current`); the queries above are random words, which supersession
  does not read as asking for a current value;
* ``calibration_embed_ms_p50`` (and ``*_x_cal``: every p50 as a multiple of it): the machine's reference
  timing, taken at the start and the end of the run (the larger is kept), so figures of runs on a busy
  machine compare; ``store_mb`` and ``peak_rss_mb`` at the end.

For the large users (the workload of the storage research note): each block's text is 24 words drawn from a
Zipf-distributed vocabulary of 20,000 words, so term frequencies look like natural text and BM25 sees
realistic posting lists; each vector is a real MiniLM vector of a pool sentence plus noise, re-normalised.
Embedding 111k texts would take minutes and measure the embedder again, not the search, whose cost depends
on the number of rows and postings, not on the vectors' values. Queries are three mid-frequency words
(Zipf ranks 50-2000), embedded for real inside the timed search.
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memlane.bench.perfcurve import (
    add_restated_facts,
    exact_twin,
    measure_current,
    measure_stages,
    peak_rss_mb,
    percentile,
    ratios,
    size_label,
    store_bytes,
    write_curve_plot,
)
from memlane.bench.perffilter import (
    VectorCache,
    bench_block,
    fill_real_user,
    load_real_turns,
    measure_filtered,
    write_bench_blocks,
)
from memlane.bench.retrieval.runlog import calibrate
from memlane.core.embedding.protocol import Embedder
from memlane.core.memory import AddRequest, Memory
from memlane.core.model import PerspectiveMode
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore

_SUBJECTS = [
    "I",
    "my sister",
    "my brother",
    "our team",
    "my friend Ana",
    "the landlord",
    "my manager",
    "my dog",
    "we",
    "my doctor",
]
_VERBS = [
    "visited",
    "talked about",
    "booked",
    "cancelled",
    "bought",
    "painted",
    "cooked",
    "fixed",
    "planned",
    "read about",
    "moved to",
    "adopted",
]
_OBJECTS = [
    "a trip to Lisbon",
    "the new apartment",
    "a vegan lasagna",
    "the quarterly report",
    "a yoga class",
    "a used Mazda 3",
    "the garden shed",
    "a concert in Ghent",
    "the dentist appointment",
    "a birthday party",
    "a pottery workshop",
    "the kitchen sink",
    "a hiking route",
    "a chess tournament",
    "the wedding playlist",
    "a marathon training plan",
]
_WHEN = [
    "yesterday",
    "last Tuesday",
    "this morning",
    "two weeks ago",
    "on Friday",
    "in March",
    "after work",
    "over the weekend",
]


def sentence(rng: random.Random, i: int) -> str:
    """A chat-like sentence; ``i`` makes it distinct (so no cache hit hides embedder work)."""
    return (
        f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)}, "
        f"and it was note number {i} about {rng.choice(_OBJECTS)}."
    )


@dataclass
class PerfSettings:
    embedder_sentences: int = 1000
    ingest_adds: int = 200
    bulk_exchanges: int = 2000
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    queries: int = 100
    seed: int = 7
    # The store's approximate index (its default threshold), built inside the warm-up search so that its
    # build is timed and every timed search uses it.
    ann: AnnSettings = field(default_factory=lambda: AnnSettings(background=False))
    ingest_at_size: int = 20  # adds timed into each large user
    # ``real``: the large users hold real conversation turns (memlane.bench.perffilter), from the LongMemEval
    # files under ``data_dir`` when they are there, else the LoCoMo that ships; their vectors are kept in a
    # cache file under ``cache_dir`` (default: the run's temporary folder, so embedded anew).
    vectors: str = "synthetic"
    data_dir: Path | None = None
    cache_dir: Path | None = None
    # Annotation filters matching these shares of each large user's blocks (memlane.bench.perffilter).
    filter_selectivity: tuple[float, ...] = ()
    # Rounds of the current-value questions per large user (memlane.bench.perfcurve.measure_current); 0: none.
    current_rounds: int = 10


class PerfStores:
    """A fresh store for each phase: a file in a temporary folder, or with a ``postgresql://`` URL a schema
    of its own in that database (dropped by :meth:`cleanup`)."""

    def __init__(self, folder: Path, url: str | None = None) -> None:
        self.folder = folder
        self.url = url
        self._schemas: list[str] = []

    def open(self, name: str, durability: str = "full", ann: AnnSettings | None = None) -> Store:
        if self.url is None:
            return SqliteStore(self.folder / f"{name}.db", durability=durability, ann=ann)
        from memlane.core.store.postgres.store import PostgresStore

        self._schemas.append(f"memlane_perf_{uuid.uuid4().hex[:8]}_{name}")
        return PostgresStore(self.url, schema=self._schemas[-1], durability=durability, ann=ann)

    def cleanup(self) -> None:
        from memlane.core.store.postgres.schema import drop_schema

        for schema in self._schemas:
            drop_schema(self.url or "", schema)
        self._schemas.clear()


def run_perf(
    embedder: Embedder,
    settings: PerfSettings | None = None,
    *,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _m: None,
    store: str | None = None,
    out_dir: Path | None = None,
) -> dict[str, float]:
    """Run every measurement and return the figures (milliseconds, per-second rates). ``store`` is a
    PostgreSQL URL to measure that backend (in throwaway schemas); by default the embedded SQLite store.
    ``out_dir``: a folder to write ``perf.json`` and ``perf-curve.png`` (the stages against size) into."""
    cfg = settings or PerfSettings()
    rng = random.Random(cfg.seed)
    out: dict[str, float] = {}
    first_cal = calibrate(embedder)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        stores = PerfStores(Path(tmp), store)
        try:
            _measure(embedder, cfg, rng, stores, out, progress)
        finally:
            stores.cleanup()
    out["calibration_embed_ms_p50"] = max(first_cal, calibrate(embedder))
    out["peak_rss_mb"] = peak_rss_mb()
    out.update(ratios(out))
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        engine = "postgres" if store else "sqlite"
        (out_dir / "perf.json").write_text(json.dumps({"engine": engine, "figures": out}, indent=1) + "\n")
        write_curve_plot(out, cfg.sizes, engine, out_dir / "perf-curve.png")
    return out


def _measure(
    embedder: Embedder,
    cfg: PerfSettings,
    rng: random.Random,
    stores: PerfStores,
    out: dict[str, float],
    progress: Callable[[str], None],
) -> None:
    progress("embedder throughput")
    texts = [
        f"user: {sentence(rng, 2 * i)}\nassistant: {sentence(rng, 2 * i + 1)}" for i in range(cfg.embedder_sentences)
    ]
    embedder.embed(texts[:64])  # warm-up: first runs allocate
    t0 = time.perf_counter()
    embedder.embed(texts)
    out["embedder_sentences_per_s"] = len(texts) / (time.perf_counter() - t0)

    progress("ingest latency")
    mem = Memory(stores.open("ingest"), embedder)
    lat: list[float] = []
    for i in range(cfg.ingest_adds):
        msgs = [
            {"role": "user", "content": sentence(rng, 10_000_000 + i)},
            {"role": "assistant", "content": f"Noted, thanks for telling me ({i})."},
        ]
        t0 = time.perf_counter()
        mem.add("perf-user", msgs, session_id=f"s{i}", time=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(i))
        lat.append((time.perf_counter() - t0) * 1000)
    out["ingest_p50_ms"] = statistics.median(lat)
    out["ingest_p95_ms"] = percentile(lat, 0.95)
    mem.close()

    progress("bulk ingest")
    mem = Memory(stores.open("bulk"), embedder)
    per_session = 10
    reqs = [
        AddRequest(
            user=f"bulk-{s % 20}",
            messages=[
                {"role": role, "content": sentence(rng, 20_000_000 + s * per_session * 2 + j * 2 + r)}
                for j in range(per_session)
                for r, role in enumerate(("user", "assistant"))
            ],
            session_id=f"s{s}",
            time=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=s),
            perspective=PerspectiveMode.SINGLE,
        )
        for s in range(cfg.bulk_exchanges // per_session)
    ]
    # Single mode: each exchange (a distinct message and reply) is one block and one embedding.
    t0 = time.perf_counter()
    n_blocks = 0
    for start in range(0, len(reqs), 50):
        n_blocks += sum(len(r.block_ids) for r in mem.add_many(reqs[start : start + 50]))
    out["bulk_blocks_per_s"] = n_blocks / (time.perf_counter() - t0)
    out["bulk_vs_embedder"] = out["bulk_blocks_per_s"] / out["embedder_sentences_per_s"]
    mem.close()

    progress("search latency: building users")
    search_store = stores.open("search", durability="normal", ann=cfg.ann)
    mem = Memory(search_store, embedder)
    exact = exact_twin(search_store)
    pool = embedder.embed([sentence(rng, 30_000_000 + i) for i in range(1000)])
    nrng = np.random.default_rng(cfg.seed)
    vocab = _vocabulary(rng)
    queries = [" ".join(rng.choice(vocab[50:2000]) for _ in range(3)) for _ in range(cfg.queries)]
    real = cfg.vectors == "real"
    if real:
        progress("real turns: loading and embedding (cached)")
        turns = load_real_turns(cfg.data_dir, max(cfg.sizes, default=0), cfg.queries, cfg.seed)
        cache = VectorCache((cfg.cache_dir or stores.folder) / "perf" / "vectors.sqlite")
        t0 = time.perf_counter()
        real_vectors = cache.embed(embedder, mem.embedder.model_id, [t for t, _ in turns.exchanges])
        cache.close()
        out["real_embed_s"] = time.perf_counter() - t0
        queries = turns.queries
        progress(f"real turns: {len(turns.exchanges)} exchanges of {turns.source}, {len(queries)} queries")
    for size in cfg.sizes:
        progress(f"search latency: building a user of {size} blocks")
        t0 = time.perf_counter()
        if real:
            part = replace(turns, exchanges=turns.exchanges[:size])
            fill_real_user(
                search_store,
                f"user-{size}",
                part,
                real_vectors[:size],
                mem.embedder.model_id,
                cfg.filter_selectivity,
                cfg.seed,
            )
        else:
            _fill_user(
                search_store, f"user-{size}", size, pool, vocab, nrng, mem.embedder.model_id, cfg.filter_selectivity
            )
        out[f"build_s_{size_label(size)}"] = time.perf_counter() - t0
    for size in cfg.sizes:
        progress(f"search latency: {size} blocks")
        user, label = f"user-{size}", size_label(size)
        if cfg.ann.applies(size):
            qv = embedder.embed([queries[0]])[0]
            t0 = time.perf_counter()
            search_store.vector_candidates(user, qv, 10)
            out[f"ann_build_s_{label}"] = time.perf_counter() - t0
        stages = measure_stages(mem, exact, user, queries, label)
        if real:  # the recall of real vectors is named apart from the synthetic one's: ann_recall10_real_1k
            stages = {
                (k.removesuffix(label) + f"real_{label}" if k.startswith("ann_recall") else k): v
                for k, v in stages.items()
            }
        out.update(stages)
        if cfg.filter_selectivity:
            progress(f"filtered search: {size} blocks")
            out.update(measure_filtered(mem, exact, user, queries, label, cfg.filter_selectivity, real=real))
        # Adds into the large user, each followed by a search, as a live user's are: the add extends the
        # cached indexes, and the search after it reads the extended ones.
        lat, after = [], []
        for i in range(cfg.ingest_at_size):
            msgs = [
                {"role": "user", "content": sentence(rng, 50_000_000 + size + i)},
                {"role": "assistant", "content": f"Noted ({i})."},
            ]
            t0 = time.perf_counter()
            mem.add(user, msgs, session_id="late")
            lat.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            mem.search(user, queries[i % len(queries)], k=10)
            after.append((time.perf_counter() - t0) * 1000)
        if lat:
            out[f"ingest_p50_ms_{label}"] = statistics.median(lat)
            out[f"search_after_add_p50_ms_{label}"] = statistics.median(after)
        if cfg.current_rounds:
            # Last, so the figures above are of the user as built: facts told and told again, and the
            # questions about their current values, the searches that reach supersession's value test.
            progress(f"current-value searches: {size} blocks")
            add_restated_facts(mem, user, rng, datetime(2024, 6, 1, tzinfo=UTC))
            out.update(measure_current(mem, user, cfg.current_rounds, label))
    out["store_mb"] = store_bytes(search_store) / 1e6
    exact.close()
    mem.close()


def _fill_user(
    store: Store,
    user: str,
    size: int,
    pool: np.ndarray,
    vocab: list[str],
    nrng: np.random.Generator,
    model_id: str,
    selectivities: tuple[float, ...] = (),
) -> None:
    """``size`` blocks written straight to the store, their vectors also in the embedding cache (as an add
    leaves them, where supersession reads them); with ``selectivities``, one ``share_<i>`` annotation per
    selectivity (``in`` on that share of the blocks, :mod:`memlane.bench.perffilter`)."""
    shares = random.Random(size)
    base = datetime(2023, 1, 1, tzinfo=UTC)
    now = datetime.now(tz=UTC)
    for start in range(0, size, 5000):
        n = min(5000, size - start)
        picks = nrng.integers(0, len(pool), n)
        vecs = pool[picks] + nrng.normal(0, 0.05, (n, pool.shape[1])).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        words = np.minimum(nrng.zipf(1.1, (n, 24)) - 1, len(vocab) - 1)
        blocks = []
        for j in range(n):
            i = start + j
            text = "user: " + " ".join(vocab[w] for w in words[j])
            ev = base + timedelta(minutes=i)
            blocks.append(bench_block(user, i, text, ev, now, shares, selectivities))
        write_bench_blocks(store, user, blocks, vecs, model_id)


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    """Distinct pronounceable pseudo-words; index = Zipf rank."""
    cons, vow = "bcdfghklmnprstvz", "aeiou"
    words: dict[str, None] = {}
    while len(words) < size:
        n = rng.randint(2, 4)
        words["".join(rng.choice(cons) + rng.choice(vow) for _ in range(n))] = None
    return list(words)


TARGETS = {
    "ingest_p50_ms": ("<=", 10.0),
    "search_p50_ms_10k": ("<=", 10.0),
    "search_p50_ms_100k": ("<=", 10.0),
    "search_p50_ms_1m": ("<=", 30.0),
    "ann_recall10_100k": (">=", 0.99),
    "ann_recall10_1m": (">=", 0.99),
    "bulk_vs_embedder": (">=", 0.8),
}


def format_report(figures: dict[str, float]) -> str:
    """A plain table of the figures with the targets they are checked against."""
    lines = ["| figure | value | target |", "|---|---|---|"]
    for key, value in figures.items():
        target = TARGETS.get(key)
        mark = ""
        if target:
            op, limit = target
            ok = value <= limit if op == "<=" else value >= limit
            mark = f"{op} {limit} {'ok' if ok else 'MISSED'}"
        lines.append(f"| {key} | {value:.2f} | {mark} |")
    return "\n".join(lines)
