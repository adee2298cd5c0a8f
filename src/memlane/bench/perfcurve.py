"""How search cost grows with the user (``memlane bench perf`` per size): each stage timed on its own, the
approximate index's recall against the exact scan, ingest into a large user, the store's size and the
process's peak memory, and a log-log plot of the stages against the user's size.

Stages, each the p50 (and p95) over the same queries, timed by calling the store as a search does:
``embed`` (the query's embedding), ``vector`` (the store's vector candidates: the approximate index past
its threshold, else the exact scan), ``vector_exact`` (the exact scan, for comparison), ``keyword`` (BM25
candidates), and ``search`` (``Memory.search`` end to end, hybrid preset; ``search_no_supersede``: the
same without supersession, timed right after it for every other query and right before it for the others);
``ranking`` is ``search`` minus
the three stages it runs (fusion, context, fetching blocks).
"""

from __future__ import annotations

import math
import random
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from memlane.core.memory import Memory
from memlane.core.model import PerspectiveMode
from memlane.core.store.candidates.annsettings import EXACT
from memlane.core.store.protocol import Store

CANDIDATES = 50  # what a default search (k = 10) asks each retriever for
NO_SUPERSEDE = "hybrid-no-supersede"
STAGES = ("embed", "vector", "keyword", "ranking", "search")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def measure_stages(mem: Memory, exact: Store, user: str, queries: list[str], label: str) -> dict[str, float]:
    """The p50 and p95 of every stage (see the module's docstring) and the index's recall@10 and @50."""
    store, embedder = mem.store, mem.embedder.inner
    vectors = embedder.embed(queries)
    mem.search(user, queries[0], 10)  # warm-up: loads the user's caches (and their index)
    exact.vector_candidates(user, vectors[0], CANDIDATES)
    times: dict[str, list[float]] = {s: [] for s in (*STAGES, "vector_exact", "search_no_supersede")}
    recall10 = recall50 = 0.0
    for i, (text, vec) in enumerate(zip(queries, vectors, strict=True)):
        if i % 2:  # every other query, the search without supersession runs first: no order favours one
            t = time.perf_counter()
            mem.search(user, text, 10, mode=NO_SUPERSEDE)
            times["search_no_supersede"].append((time.perf_counter() - t) * 1000)
        t0 = time.perf_counter()
        embedder.embed([text])
        t1 = time.perf_counter()
        found = store.vector_candidates(user, vec, CANDIDATES)
        t2 = time.perf_counter()
        truth = exact.vector_candidates(user, vec, CANDIDATES)
        t3 = time.perf_counter()
        store.keyword_candidates(user, text, CANDIDATES, b=0.5)
        t4 = time.perf_counter()
        mem.search(user, text, 10)
        t5 = time.perf_counter()
        if not i % 2:  # the same search without supersession, in the same run: what supersession costs
            mem.search(user, text, 10, mode=NO_SUPERSEDE)
            times["search_no_supersede"].append((time.perf_counter() - t5) * 1000)
        for stage, (a, b) in zip(
            ("embed", "vector", "vector_exact", "keyword", "search"),
            ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)),
            strict=True,
        ):
            times[stage].append((b - a) * 1000)
        got, want = [pk for pk, _ in found], [pk for pk, _ in truth]
        recall10 += len(set(got[:10]) & set(want[:10])) / max(1, min(10, len(want)))
        recall50 += len(set(got) & set(want)) / max(1, len(want))
    times["ranking"] = [
        max(0.0, s - e - v - k)
        for s, e, v, k in zip(times["search"], times["embed"], times["vector"], times["keyword"], strict=True)
    ]
    out: dict[str, float] = {}
    for stage, values in times.items():
        out[f"{stage}_p50_ms_{label}"] = statistics.median(values)
        out[f"{stage}_p95_ms_{label}"] = percentile(values, 0.95)
    out[f"ann_recall10_{label}"] = recall10 / len(queries)
    out[f"ann_recall50_{label}"] = recall50 / len(queries)
    return out


# Facts a user restates as they change, for the searches that reach supersession's value test
# (:func:`add_restated_facts`, :func:`measure_current`): what the user says, and the question about its
# current value, which supersession reads as one.
RESTATED = (
    ("I have {n} bikes in the garage now.", "How many bikes do I have now?"),
    ("I keep {n} houseplants in my apartment.", "How many houseplants do I currently have?"),
    ("My guitar collection is up to {n} guitars.", "How many guitars do I own?"),
    ("I go swimming {n} times a week these days.", "How often do I go swimming?"),
    ("My Instagram account has {n} followers.", "How many Instagram followers do I have now?"),
    ("I have read {n} books so far this year.", "How many books have I read so far this year?"),
    ("I have {n} coins in my pre-1920 collection.", "How many coins are in my pre-1920 collection?"),
    ("My personal best for the 5K is {n} minutes.", "What is my current personal best for the 5K?"),
    ("I work {n} hours a week at the bakery.", "How many hours a week do I work at the bakery?"),
    ("My rent is {n}00 dollars a month.", "How much is my rent now?"),
)
TELLINGS = 3  # each fact told this many times, weeks apart, with another value each time


def add_restated_facts(mem: Memory, user: str, rng: random.Random, start: datetime) -> None:
    """Each :data:`RESTATED` fact told :data:`TELLINGS` times into ``user``'s history (an exchange each, a
    week apart, its value changing every time), in single perspective, as a chat assistant's user says it."""
    for i, (said, _) in enumerate(RESTATED):
        values = rng.sample(range(2, 60), TELLINGS)
        for t, n in enumerate(values):
            messages = [
                {"role": "user", "content": f"By the way, {said.format(n=n)} Any tips for me?"},
                {"role": "assistant", "content": "Good to know! Here are a few ideas for you."},
            ]
            when = start + timedelta(weeks=t, hours=i)
            mem.add(user, messages, session_id=f"facts-{i}-{t}", time=when, perspective=PerspectiveMode.SINGLE)


def measure_current(mem: Memory, user: str, rounds: int, label: str) -> dict[str, float]:
    """The p50 and p95 of a search whose question asks for a current value that :func:`add_restated_facts`
    told three times (the searches that reach supersession's value test), with supersession
    (``search_current``) and without it (``search_current_no_supersede``), alternating which runs first; the
    ratio of the two p50s (``supersede_current_ratio``); and the share of those searches whose first hit is
    the newest telling, with and without (``current_newest_first``, ``current_newest_first_no_supersede``)."""
    questions = [q for _, q in RESTATED]
    mem.search(user, questions[0], 10)  # warm-up
    times: dict[str, list[float]] = {"search_current": [], "search_current_no_supersede": []}
    newest = {"search_current": 0, "search_current_no_supersede": 0}
    for r in range(rounds):
        for i, question in enumerate(questions):
            runs = [("search_current", None), ("search_current_no_supersede", NO_SUPERSEDE)]
            for name, mode in runs if (r + i) % 2 == 0 else runs[::-1]:
                t0 = time.perf_counter()
                hits = mem.search(user, question, 10) if mode is None else mem.search(user, question, 10, mode=mode)
                times[name].append((time.perf_counter() - t0) * 1000)
                told = [h for h in hits if h.block.session_id.startswith(f"facts-{i}-")]
                latest = max((h.block.event_time for h in told), default=None)
                newest[name] += bool(hits) and latest is not None and hits[0].block.event_time == latest
    out: dict[str, float] = {}
    for name, values in times.items():
        out[f"{name}_p50_ms_{label}"] = statistics.median(values)
        out[f"{name}_p95_ms_{label}"] = percentile(values, 0.95)
    with_, without = out[f"search_current_p50_ms_{label}"], out[f"search_current_no_supersede_p50_ms_{label}"]
    out[f"supersede_current_ratio_{label}"] = with_ / without if without else math.nan
    searches = rounds * len(questions)
    out[f"current_newest_first_{label}"] = newest["search_current"] / searches
    out[f"current_newest_first_no_supersede_{label}"] = newest["search_current_no_supersede"] / searches
    return out


def exact_twin(store: Store) -> Store:
    """Another handle on the same store that never uses an approximate index (the recall's reference)."""
    from memlane.core.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return SqliteStore(store.path, durability=store.durability, ann=EXACT)
    from memlane.core.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    return PostgresStore(store.url, schema=store.schema, ann=EXACT, pool_max=2)


def store_bytes(store: Store) -> int:
    """The store's bytes on disk: the SQLite file, its WAL and index files; the PostgreSQL schema's tables
    with their indexes and TOAST."""
    from memlane.core.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        paths = [store.path, store.path.with_name(store.path.name + "-wal")]
        ann = store.path.with_name(store.path.name + ".ann")
        if ann.is_dir():
            paths += list(ann.iterdir())
        return sum(p.stat().st_size for p in paths if p.is_file())
    from memlane.core.store.postgres.store import PostgresStore

    assert isinstance(store, PostgresStore)
    rows = store.query(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = current_schema()"
    )
    return int(rows[0][0])


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_curve_plot(figures: dict[str, float], sizes: Sequence[int], engine: str, path: Path) -> None:
    """p50 of each stage against the user's size, log-log, one line per stage (and the exact scan)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    labels = [size_label(s) for s in sizes]
    for i, stage in enumerate((*STAGES, "vector_exact")):
        ys = [figures.get(f"{stage}_p50_ms_{lab}") for lab in labels]
        points = [(s, y) for s, y in zip(sizes, ys, strict=True) if y is not None and y > 0]
        if points:
            xs, vs = zip(*points, strict=True)
            style = ":" if stage == "vector_exact" else "-"
            ax.plot(xs, vs, style, marker="o", color=f"C{i}", label=f"{engine}: {stage}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("blocks in the user")
    ax.set_ylabel("p50 latency (ms)")
    cal = figures.get("calibration_embed_ms_p50")
    ax.set_title(f"search stages by user size ({engine}; calibration {cal:.2f} ms)" if cal else engine)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def size_label(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def ratios(figures: dict[str, float]) -> dict[str, float]:
    """Every p50 as a multiple of the calibration measured in the same run."""
    cal = figures.get("calibration_embed_ms_p50")
    if not cal:
        return {}
    return {f"{k}_x_cal": v / cal for k, v in figures.items() if "_p50_ms_" in k}


def fresh_vectors(pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` vectors near the pool's (a real sentence's vector plus noise), L2-normalised."""
    vecs = pool[rng.integers(0, len(pool), n)] + rng.normal(0, 0.05, (n, pool.shape[1])).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs.astype(np.float32)
