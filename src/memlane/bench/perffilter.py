"""Filtered search in ``memlane bench perf``: users of real conversation turns, annotation filters of a
chosen selectivity, their latency against the unfiltered search of the same run and their recall against
the exact filtered answer.

``--vectors real`` fills each large user with real exchanges instead of the synthetic blocks of
:mod:`memlane.bench.perf` (whose vectors are a thousand near-copies per query, so an index's recall on them
measures the data, not the index): LongMemEval-S's sessions when the data folder holds them, else the
LoCoMo conversations that ship with memlane, repeated with their dates moved on by a year per pass. Each
distinct text is embedded once and kept in a vector cache file (``<cache dir>/perf/vectors.sqlite``, keyed by
the model and the text's hash), so later runs embed nothing. Queries are user turns that are not in the
store (real questions of the same kind).

``--filter-selectivity 0.01,0.1,0.5``: every block carries one annotation per selectivity, ``in`` on a
random share of that size and ``out`` on the rest; for each selectivity and size the figures are

* ``filtered_search_p50_ms_<size>_<sel>``: ``Memory.search`` (hybrid, k = 10) with that annotation filter,
  timed alternately with the same query unfiltered (``unfiltered_search_p50_ms_<size>_<sel>``) and their
  ratio ``filtered_vs_unfiltered_<size>_<sel>``;
* ``filtered_recall_at_10_[real_]<size>_<sel>``: the store's filtered vector candidates (the approximate
  index past its threshold, falling back to exact scoring where the filter keeps too few blocks) against an
  exact filtered scan of the same store. Equal vectors (LoCoMo's repeats) tie: a hit counts when its
  cosine reaches the exact tenth's.
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memlane.bench.perfcurve import percentile
from memlane.core.embedding.protocol import Embedder
from memlane.core.memory import Memory, new_block_id
from memlane.core.model import ExtractionStatus, Filters, MemoryBlock, PerspectiveMode, content_hash
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.protocol import Store
from memlane.core.timefmt import annotate

LOCOMO_YEAR = timedelta(days=365)


@dataclass(frozen=True, slots=True)
class RealTurns:
    """Exchanges to fill users with and user turns to ask with, and where they came from."""

    source: str
    exchanges: list[tuple[str, datetime]]
    queries: list[str]


def selectivity_key(index: int) -> str:
    """The annotation key of the ``index``-th selectivity."""
    return f"share_{index}"


def selectivity_label(sel: float) -> str:
    """``0.01`` -> ``"0.01"``: how a selectivity names its figures."""
    return f"{sel:g}"


def load_real_turns(data_dir: Path | None, need: int, queries: int, seed: int) -> RealTurns:
    """At least ``need`` exchanges (user turn and reply as ``role: text`` lines, with the session's date)
    and ``queries`` user turns held out of them."""
    from memlane.bench.datasets.registry import load_dataset

    lme = data_dir is not None and any((data_dir / "longmemeval").glob("longmemeval_s*"))
    name = "longmemeval-s" if lme else "locomo"
    ds = load_dataset(name, data_dir if lme else None)
    # Each session once, in the data set's order: LongMemEval's haystacks share sessions (the same id and
    # turns), while each LoCoMo conversation numbers its own from session_1 (the same id, other turns).
    sessions = {
        (s.session_id, tuple((t.role, t.content) for t in s.turns)): s
        for history in ds.histories.values()
        for s in history
    }.values()
    wanted = need + 4 * queries if lme else None  # LoCoMo is small: all of it
    pairs: list[tuple[str, datetime]] = []
    base = datetime(2023, 1, 1, tzinfo=UTC)
    for session in sessions:
        when = session.started_at or base
        turns = session.turns
        for i in range(0, len(turns) - 1, 2):
            first, reply = turns[i], turns[i + 1]
            pairs.append((f"{first.role}: {first.content}\n{reply.role}: {reply.content}", when))
        if wanted is not None and len(pairs) >= wanted:
            break
    rng = random.Random(seed)
    rng.shuffle(pairs)
    # Held-out turns: the first line of exchanges kept out of the store.
    held, pairs = pairs[: 2 * queries], pairs[2 * queries :]
    asked = [text.split("\n", 1)[0].split(": ", 1)[-1] for text, _ in held]
    asked = [q for q in asked if len(q.split()) >= 3][:queries]
    if not lme:  # LoCoMo is small: repeat it, a year later per pass
        distinct = list(pairs)
        rounds = 1
        while len(pairs) < need:
            pairs += [(text, when + rounds * LOCOMO_YEAR) for text, when in distinct]
            rounds += 1
    return RealTurns(source=name, exchanges=pairs[:need], queries=asked)


class VectorCache:
    """Vectors of texts by model and text hash in one SQLite file: what ``--vectors real`` embeds once."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vec BLOB, PRIMARY KEY (model, hash))"
        )

    def embed(self, embedder: Embedder, model_id: str, texts: Sequence[str], batch: int = 256) -> np.ndarray:
        hashes = [content_hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for h, blob in self.db.execute(
                f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({marks})", (model_id, *chunk)
            ):
                found[h] = np.frombuffer(blob, dtype=np.float32)
        missing = list(dict.fromkeys(t for t, h in zip(texts, hashes, strict=True) if h not in found))
        for start in range(0, len(missing), batch):
            chunk_texts = missing[start : start + batch]
            vecs = np.asarray(embedder.embed(chunk_texts), dtype=np.float32)
            rows = [(model_id, content_hash(t), v.tobytes()) for t, v in zip(chunk_texts, vecs, strict=True)]
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
            self.db.commit()
            for (_, h, _), v in zip(rows, vecs, strict=True):
                found[h] = v
        return np.stack([found[h] for h in hashes]).astype(np.float32)

    def close(self) -> None:
        self.db.close()


def bench_block(
    user: str, i: int, text: str, ev: datetime, now: datetime, shares: random.Random, selectivities: Sequence[float]
) -> MemoryBlock:
    """The ``i``-th block of a bench user (sessions of 20 exchanges), with one ``share_<n>`` annotation per
    selectivity: ``in`` on that share of the blocks, drawn from ``shares``."""
    return MemoryBlock(
        id=new_block_id(),
        user=user,
        conversation_id="c",
        session_id=f"s{i // 20}",
        exchange_index=i % 20,
        perspective="exchange",
        mode=PerspectiveMode.SINGLE,
        message=text,
        event_time=ev,
        ingest_time=now,
        time_annotation=annotate(ev),
        content_hash=content_hash(text),
        extraction_status=ExtractionStatus.OFF,
        annotations={
            selectivity_key(n): "in" if shares.random() < sel else "out" for n, sel in enumerate(selectivities)
        },
    )


def write_bench_blocks(store: Store, user: str, blocks: list[MemoryBlock], vectors: np.ndarray, model_id: str) -> None:
    """Blocks written straight to the store, their vectors also in its embedding cache (as an add leaves
    them, where supersession reads them)."""
    vecs = np.asarray(vectors, dtype=np.float32)
    store.write_blocks(user, blocks, vecs)
    store.put_vectors(model_id, {b.content_hash: v for b, v in zip(blocks, vecs, strict=True)})


def fill_real_user(
    store: Store,
    user: str,
    turns: RealTurns,
    vectors: np.ndarray,
    model_id: str,
    selectivities: Sequence[float],
    seed: int,
) -> None:
    """The user's blocks: the real exchanges with their vectors (also in the store's embedding cache, as an
    add leaves them), one ``share_<i>`` annotation per selectivity (``in`` on that share of the blocks)."""
    rng = random.Random(seed)
    now = datetime.now(tz=UTC)
    size = len(turns.exchanges)
    for start in range(0, size, 5000):
        chunk = turns.exchanges[start : start + 5000]
        vecs = vectors[start : start + len(chunk)]
        blocks = []
        for j, (text, when) in enumerate(chunk):
            i = start + j
            ev = when + timedelta(seconds=i % 20)
            blocks.append(bench_block(user, i, text, ev, now, rng, selectivities))
        write_bench_blocks(store, user, blocks, vecs, model_id)


def tie_aware_recall(got: Sequence[tuple[int, float]], want: Sequence[tuple[int, float]], k: int = 10) -> float:
    """The share of the exact top ``k`` that ``got`` found, where a hit counts if it is in the exact top k
    or scores at least the exact k-th (equal vectors are interchangeable)."""
    truth = list(want[:k])
    if not truth:
        return 1.0
    floor = truth[-1][1] - 1e-5
    ids = {pk for pk, _ in truth}
    hits = sum(1 for pk, score in got[:k] if pk in ids or score >= floor)
    return min(1.0, hits / len(truth))


def measure_filtered(
    mem: Memory,
    exact: Store,
    user: str,
    queries: Sequence[str],
    label: str,
    selectivities: Sequence[float],
    *,
    real: bool,
) -> dict[str, float]:
    """The filtered figures of one user (see the module's docstring)."""
    store, embedder = mem.store, mem.embedder.inner
    vectors = embedder.embed(list(queries))
    out: dict[str, float] = {}
    recall_name = f"filtered_recall_at_10_{'real_' if real else ''}{label}"
    for n, sel in enumerate(selectivities):
        filters = Filters(annotations={selectivity_key(n): "in"})
        mem.search(user, queries[0], 10, filters=filters)  # warm-up: the filter's pool
        filtered: list[float] = []
        plain: list[float] = []
        recall = 0.0
        for i, (text, vec) in enumerate(zip(queries, vectors, strict=True)):
            order = (True, False) if i % 2 else (False, True)  # no order favours one
            for with_filter in order:
                t0 = time.perf_counter()
                mem.search(user, text, 10, filters=filters if with_filter else None)
                (filtered if with_filter else plain).append((time.perf_counter() - t0) * 1000)
            got = store.vector_candidates(user, vec, 10, Scope(filters=filters))
            want = exact.vector_candidates(user, vec, 10, Scope(filters=filters))
            recall += tie_aware_recall(got, want)
        sl = selectivity_label(sel)
        out[f"filtered_search_p50_ms_{label}_{sl}"] = statistics.median(filtered)
        out[f"filtered_search_p95_ms_{label}_{sl}"] = percentile(filtered, 0.95)
        out[f"unfiltered_search_p50_ms_{label}_{sl}"] = statistics.median(plain)
        out[f"filtered_vs_unfiltered_{label}_{sl}"] = statistics.median(filtered) / statistics.median(plain)
        out[f"{recall_name}_{sl}"] = recall / len(queries)
    return out
