"""Choosing search settings on the dev split: a grid over :class:`SearchSettings`, scored offline.

Each dev question is searched once for its candidates (:func:`memlane.core.retrieval.collect`: each
retriever's top ``candidates`` blocks, with every candidate's place and its session's rank by people's
words, and what supersession reads of each: :meth:`memlane.core.retrieval.Known.of`); every grid point
then orders those candidates with :func:`memlane.core.retrieval.order` (rank, then supersession: the stage
``Memory.search`` runs) and scores the ranking with the harness's scorer. A point costs milliseconds per
question instead of a store round trip, and its figures equal a ``bench retrieval`` run with the same
settings, provided ``candidates``, ``mode`` and the BM25 parameters stay at their collected values (the grid
may not vary them: they change the candidates themselves).

Only ``dev`` questions are read unless asked otherwise: parameters are chosen there, figures are read on
``test`` (:mod:`memlane.bench.split`). The objective is the sum of the mean of each named metric (LoCoMo
categories 1-4, LongMemEval without abstention, as the reports' headline rows): a plain metric counts on
every data set, ``DATASET:metric`` on that data set only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace

from memlane.bench.datasets.families import LOCOMO
from memlane.bench.datasets.model import Sample
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.retrieval.history import HaystackIndex, Rankings, blocks_per_exchange, rank
from memlane.bench.retrieval.ingest import ingest
from memlane.bench.retrieval.paired import PairedDiff, paired_diff
from memlane.bench.retrieval.run import RetrievalOptions, open_bench
from memlane.bench.retrieval.runlog import MIN_RANKING_LENGTH
from memlane.bench.split import sample_splitter
from memlane.core import retrieval
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.model import MemoryBlock, SearchMode
from memlane.core.retrieval import MAX_K, Candidates, Fusion, Known, SearchSettings, Version, with_candidates

DEFAULT_METRICS: tuple[str, ...] = ("turn/recall_all@10", "session/recall_all@5")
# Fields a grid may vary: the ones applied after the candidates are collected (``fusion`` takes the names
# rrf and score, the others numbers).
TUNABLE: tuple[str, ...] = tuple(
    f.name for f in fields(SearchSettings) if f.name not in ("mode", "candidates", "fact_keys", "bm25_k1", "bm25_b")
)


@dataclass(frozen=True)
class QuestionCandidates:
    """What one question's searches can return under any tunable setting."""

    sample: Sample
    index: HaystackIndex
    candidates: Candidates  # with every candidate's context, whatever the settings read
    blocks: dict[int, MemoryBlock]
    versions: dict[int, Version]  # what supersession reads of every candidate


@dataclass(frozen=True)
class DevSet:
    """One data set's collected questions, with the depth and cut-offs its scores use."""

    dataset: str
    questions: tuple[QuestionCandidates, ...]
    depth: int
    ks: tuple[int, ...]
    candidates: int
    bm25: tuple[float, float]  # the keyword candidates' (k1, b)


def collect(
    options: RetrievalOptions,
    *,
    split: str = "dev",
    candidates: int | None = None,
    limit: int | None = None,
    bm25: tuple[float, float] | None = None,
) -> DevSet:
    """Ingest ``options.dataset`` into its bench store if needed (data, cache, embedder and perspective
    come from ``options``), then collect the candidates of its ``split`` questions (``limit``: at most that
    many). The ranking depth is the one ``bench retrieval`` uses for ``options.ks``, and ``candidates``
    defaults to what ``Memory.search`` fetches at that depth, so the figures equal a retrieval run's.
    Searches the hybrid retrievers with messages and facts as keys, as every hybrid preset does, BM25 with
    ``bm25`` = (k1, b) (default: :class:`SearchSettings`'s)."""
    k1, b = bm25 if bm25 is not None else (SearchSettings().bm25_k1, SearchSettings().bm25_b)
    dataset = options.dataset
    if dataset not in DATASETS:
        raise ConfigError(f"unknown data set {dataset!r}; known: {', '.join(DATASETS)}")
    if split not in ("dev", "test"):
        raise ConfigError(f"split must be dev or test, not {split!r}")
    if candidates is not None and not 1 <= candidates <= MAX_K:
        raise ConfigError(f"candidates must be from 1 to {MAX_K}, got {candidates}")
    stream, bench, mem = open_bench(options)
    try:
        ingest(stream, bench, mem, progress=False)
        family = DATASETS[dataset].family
        ks = tuple(sorted(set(options.ks)))
        depth = options.depth or min(MAX_K, max(ks) * blocks_per_exchange(bench.settings.perspective))
        if candidates is None:
            candidates = max(SearchSettings().candidates, depth)
        if candidates < depth:
            raise ConfigError(f"candidates ({candidates}) must cover the depth of the ranking ({depth})")
        split_of = sample_splitter(family, (h.namespace for h in stream) if family == LOCOMO else ())
        searched = SearchSettings(mode=SearchMode.HYBRID, candidates=candidates, bm25_k1=k1, bm25_b=b)
        out: list[QuestionCandidates] = []
        for haystack in stream:
            index = HaystackIndex.of(haystack, family)
            for sample in haystack.samples:
                if split_of(sample) != split or (limit is not None and len(out) >= limit):
                    continue
                found = retrieval.collect(
                    mem.store, mem.embedder.inner, sample.namespace, sample.question, searched, all_context=True
                )
                known = Known.of(mem.store, mem.embedder.cache, mem.embedder.model_id, sample.namespace, found)
                out.append(QuestionCandidates(sample, index, found, dict(known.blocks), dict(known.versions)))
    finally:
        bench.close()
    return DevSet(dataset, tuple(out), depth, ks, candidates, (k1, b))


def question_rankings(dev: DevSet, q: QuestionCandidates, settings: SearchSettings) -> Rankings:
    """The session and turn rankings a retrieval run logs for one question under ``settings``."""
    return _question_rankings(dev, q, settings)[0]


def _question_rankings(dev: DevSet, q: QuestionCandidates, settings: SearchSettings) -> tuple[Rankings, Rankings]:
    """The rankings of :func:`question_rankings`, and the same before supersession."""
    settings = with_candidates(settings, dev.depth)  # as Memory.search fetches at that depth
    # As bench retrieval's searches, which pass the question date as ``at``.
    asked, until = retrieval.asked_at(q.sample.question_date)
    ordered = retrieval.order(q.candidates, settings, Known(q.blocks, q.versions), asked=asked, until=until)
    length = max(MIN_RANKING_LENGTH, max(dev.ks))
    after, before = ((q.blocks[ref] for ref, _, _ in r[: dev.depth]) for r in (ordered.ranked, ordered.unmoved))
    return rank(after, q.index, length), rank(before, q.index, length)


def question_scores(dev: DevSet, q: QuestionCandidates, settings: SearchSettings) -> dict[str, float] | None:
    """The harness's scores of one question under ``settings`` (None when it is not scored), with what
    supersession moved, as a retrieval run's."""
    rankings, unmoved = _question_rankings(dev, q, settings)
    family = DATASETS[dev.dataset].family
    if family == LOCOMO and q.sample.category_number not in (1, 2, 3, 4):
        return None
    dates = q.index.session_dates
    before = (unmoved.session_ids, unmoved.turn_ids)
    return family.score(q.sample, rankings.session_ids, rankings.turn_ids, dev.ks, session_dates=dates, before=before)


def evaluate(dev: DevSet, settings: SearchSettings, metrics: Sequence[str] = DEFAULT_METRICS) -> dict[str, float]:
    """Mean of each metric over the scored questions (NaN where no question has it), and ``n``."""
    if settings.mode is not SearchMode.HYBRID or not settings.fact_keys:
        raise ConfigError("the collected candidates are those of hybrid search over all keys")
    if max(settings.candidates, dev.depth) != dev.candidates:
        # Fusion over other candidate lists would rank differently from what Memory.search does.
        raise ConfigError(
            f"{dev.dataset}: collected {dev.candidates} candidates per retriever, but these settings search "
            f"with {max(settings.candidates, dev.depth)}"
        )
    if (settings.bm25_k1, settings.bm25_b) != dev.bm25:
        raise ConfigError(
            f"{dev.dataset}: collected keyword candidates with BM25 k1, b = {dev.bm25}, but these settings "
            f"search with {(settings.bm25_k1, settings.bm25_b)}"
        )
    sums = dict.fromkeys(metrics, 0.0)
    counts = dict.fromkeys(metrics, 0)
    n = 0
    for q in dev.questions:
        scores = question_scores(dev, q, settings)
        if scores is None:
            continue
        n += 1
        for m in metrics:
            if m in scores:
                sums[m] += scores[m]
                counts[m] += 1
    out = {m: sums[m] / counts[m] if counts[m] else math.nan for m in metrics}
    out["n"] = float(n)
    return out


def grid_points(base: SearchSettings, grid: Mapping[str, Sequence[float | str]]) -> Iterator[SearchSettings]:
    """Every combination of the grid's values over ``base`` (each point validated by SearchSettings)."""
    unknown = [name for name in grid if name not in TUNABLE]
    if unknown:
        raise ConfigError(f"cannot tune {unknown[0]!r}; tunable: {', '.join(TUNABLE)}")
    names = list(grid)
    for values in itertools.product(*(grid[name] for name in names)):
        point: dict[str, object] = {}
        for name, value in zip(names, values, strict=True):
            kind = type(getattr(base, name))
            if kind is Fusion:
                point[name] = str(value)  # SearchSettings checks the name
            elif kind is bool:
                point[name] = bool(value)
            elif isinstance(value, str):
                raise ConfigError(f"{name} takes numbers, not {value!r}")
            else:
                point[name] = int(value) if kind is int else float(value)
        try:
            yield replace(base, **point)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise ConfigError(f"grid point {point}: {exc}") from exc


@dataclass(frozen=True)
class GridResult:
    """One grid point: its settings, the objective, and each data set's metric means."""

    settings: SearchSettings
    objective: float
    figures: dict[str, dict[str, float]]


def objective_terms(devs: Sequence[DevSet], metrics: Sequence[str]) -> list[tuple[str, str]]:
    """(data set, metric) pairs the objective sums: ``metric`` on every data set, ``DATASET:metric`` on one."""
    names = [d.dataset for d in devs]
    terms: list[tuple[str, str]] = []
    for spec in metrics:
        dataset, sep, metric = spec.rpartition(":")
        if sep and dataset not in names:
            raise ConfigError(f"metric {spec!r} names a data set that is not tuned here ({', '.join(names)})")
        for d in [dataset] if sep else names:
            if (d, metric) not in terms:
                terms.append((d, metric))
    return terms


def run_grid(
    devs: Sequence[DevSet],
    base: SearchSettings,
    grid: Mapping[str, Sequence[float | str]],
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> list[GridResult]:
    """Score every grid point on every data set; best objective first (ties keep grid order). ``figures``
    holds, per data set, the metrics the objective reads there and ``n``."""
    terms = objective_terms(devs, metrics)
    results: list[GridResult] = []
    for settings in grid_points(base, grid):
        figures = {dev.dataset: evaluate(dev, settings, [m for d, m in terms if d == dev.dataset]) for dev in devs}
        objective = sum(figures[d][m] for d, m in terms if not math.isnan(figures[d][m]))
        results.append(GridResult(settings, objective, figures))
    return sorted(results, key=lambda r: -r.objective)


def paired_against(dev: DevSet, base: SearchSettings, other: SearchSettings, metric: str) -> PairedDiff | None:
    """``other`` against ``base`` on ``dev``'s questions, question by question (see
    :mod:`memlane.bench.retrieval.paired`): is a grid point's lead more than a few questions' noise?"""
    a: dict[str, float] = {}
    b: dict[str, float] = {}
    for q in dev.questions:
        sa, sb = question_scores(dev, q, base), question_scores(dev, q, other)
        if sa is not None and sb is not None and metric in sa and metric in sb:
            a[q.sample.sample_id] = sa[metric]
            b[q.sample.sample_id] = sb[metric]
    return paired_diff(a, b)
