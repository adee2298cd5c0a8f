"""LLM-free retrieval evaluation: ingest once, then ask every question in every search mode.

For each question the namespace is searched once per mode with the question text, at a depth of
``max(ks)`` exchanges (``max(ks)`` blocks in single mode, twice that where an exchange yields two
blocks). With the default 50 fusion candidates that makes every prefix of the ranking identical to what a
product search with ``k`` equal to that prefix's length would return. Every k is computed from that one
ranking. Blocks map to turns and sessions as :mod:`memlane.bench.retrieval.history` describes; the scores are the
official LongMemEval metrics (session, turn, turn-to-session; abstention skipped) or LoCoMo evidence recall
(turn and session level, per category).

Modes are swept against the same bench store, so adding a mode never re-ingests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from tqdm import tqdm

from memlane.bench.datasets.model import Sample, questions
from memlane.bench.datasets.registry import DATASETS, DatasetStream, open_dataset
from memlane.bench.reports.plot import check_plotting
from memlane.bench.reports.report import write_reports
from memlane.bench.retrieval.baselines import (
    BASELINES,
    HaystackRanker,
    TermCache,
    check_baselines,
    evaluate_baseline,
)
from memlane.bench.retrieval.bm25 import Vocabulary
from memlane.bench.retrieval.history import HaystackIndex, blocks_per_exchange, rank, resolve_perspective
from memlane.bench.retrieval.ingest import (
    BenchStore,
    DatasetIdentity,
    IngestReport,
    IngestSettings,
    OnBatch,
    dataset_record,
    default_bench_cache,
    ingest,
)
from memlane.bench.retrieval.runlog import (
    CALIBRATE_EVERY,
    DEFAULT_EMBEDDER,
    DEFAULT_KS,
    LOG_NAME,
    MIN_RANKING_LENGTH,
    QuestionRecord,
    RetrievalConfig,
    RunLog,
    calibrate,
    new_header,
    pack_log,
)
from memlane.bench.split import sample_splitter
from memlane.core.embedding.protocol import make_embedder
from memlane.core.errors import ConfigError, MemlaneError
from memlane.core.memory import Memory
from memlane.core.retrieval import MAX_K, resolve_settings
from memlane.core.store.annsettings import AnnSettings

DEFAULT_MODES: tuple[str, ...] = ("vector", "keyword", "hybrid")


@dataclass(frozen=True)
class RetrievalOptions:
    """What a caller asks for; :func:`resolve_config` turns it into the logged :class:`RetrievalConfig`.

    ``depth`` (blocks retrieved per question) defaults to ``max(ks)`` exchanges' worth of blocks.
    ``before_question_date`` bounds the search to sessions dated before the end of the question's day:
    day, not minute, because LongMemEval_S orders sessions within a day arbitrarily (44 questions have an
    evidence session timed later on the question's own day).
    ``baselines`` (names from :data:`memlane.bench.retrieval.baselines.BASELINES`) are ranked in the same run, over the
    same questions, as extra modes of the log: the reference figures sit next to memlane's in one report.
    ``ann_threshold``: search users of at least this many keys through the store's approximate index (0:
    every user, to measure the index against the exact scan); None: the store's default. Logged with each
    mode's search settings when set.
    """

    dataset: str
    modes: tuple[str, ...] = DEFAULT_MODES
    ks: tuple[int, ...] = DEFAULT_KS
    limit: int | None = None
    depth: int | None = None
    before_question_date: bool = False
    embedder: str = DEFAULT_EMBEDDER
    perspective: str = "auto"
    data_dir: Path | None = None
    cache_dir: Path | None = None
    baselines: tuple[str, ...] = ()
    ann_threshold: int | None = None


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run_retrieval` did: its ingest, how many records it wrote or found already logged."""

    run_dir: Path
    ingest: IngestReport
    written: int
    already_logged: int
    errors: int
    seconds: float


def _check_options(options: RetrievalOptions) -> None:
    if options.dataset not in DATASETS:
        raise ConfigError(f"unknown data set {options.dataset!r}; known: {', '.join(DATASETS)}")
    if not options.modes:
        raise ConfigError("no search mode given")
    if len(set(options.modes)) != len(options.modes):
        raise ConfigError(f"search modes repeat: {options.modes}")
    for mode in options.modes:
        resolve_settings(mode)
    if options.baselines:
        # Baseline names never collide with preset names (check_baselines knows only baselines).
        check_baselines(options.dataset, options.baselines)
    if not options.ks or any(k < 1 for k in options.ks):
        raise ConfigError(f"k values must be positive integers, got {options.ks}")
    if options.limit is not None and options.limit < 1:
        raise ConfigError(f"--limit must be positive, got {options.limit}")
    if options.depth is not None and not 1 <= options.depth <= MAX_K:
        raise ConfigError(f"--depth must be from 1 to {MAX_K}, got {options.depth}")


def resolve_config(options: RetrievalOptions, stream: DatasetStream, settings: IngestSettings) -> RetrievalConfig:
    """The full, logged config of a run (no paths)."""
    ks = tuple(sorted(set(options.ks)))
    depth = options.depth or min(MAX_K, max(ks) * blocks_per_exchange(settings.perspective))
    search: dict[str, dict[str, object]] = {}
    for mode in options.modes:
        s = resolve_settings(mode)
        # What Memory.search will use at this depth (each retriever brings at least `depth` candidates).
        search[mode] = s.to_json() | {"candidates": max(s.candidates, depth)}
        if options.ann_threshold is not None:
            search[mode]["ann_threshold"] = options.ann_threshold
    baselines = check_baselines(options.dataset, options.baselines) if options.baselines else ()
    for b in baselines:
        search[b.name] = b.settings()
    return RetrievalConfig(
        dataset=options.dataset,
        modes=options.modes + tuple(b.name for b in baselines),
        ks=ks,
        limit=options.limit,
        depth=depth,
        min_length=max(MIN_RANKING_LENGTH, max(ks)),
        before_question_date=options.before_question_date,
        perspective=settings.perspective.value,
        embedder=settings.embedder,
        embedder_model_id=settings.embedder_model_id,
        extraction=settings.extraction,
        dataset_params=dict(stream.params),
        search_settings=search,
    )


def end_of_day(dt: datetime) -> datetime | None:
    """The start of the next day: the exclusive bound of "before the end of the question's day". None
    (no bound) on the last day a time can have, 31 December 9999, whose next day does not exist."""
    start = dt.replace(hour=0, minute=0, second=0, microsecond=0)
    return None if start.date() == date.max else start + timedelta(days=1)


def evaluate_question(
    mem: Memory,
    sample: Sample,
    index: HaystackIndex,
    mode: str,
    config: RetrievalConfig,
    split: str | None = None,
) -> QuestionRecord:
    """Search one question in one mode, rank its turns and sessions, score them. A failed search is
    logged as an error with padding-only rankings (scored like any ranking: it counts, it is not skipped)."""
    before = None
    if config.before_question_date and sample.question_date is not None:
        before = end_of_day(sample.question_date)
    started = time.perf_counter()
    error = None
    try:
        hits = mem.search(
            sample.namespace,
            sample.question,
            config.depth,
            mode=mode,
            before=before,
            at=sample.question_date,
            distinct=False,
        )
    except MemlaneError as exc:
        hits, error = [], f"{type(exc).__name__}: {exc}"
    searched = time.perf_counter()
    rankings = rank((h.block for h in hits), index, config.min_length)
    scores = DATASETS[config.dataset].family.score(sample, rankings.session_ids, rankings.turn_ids, config.ks)
    done = time.perf_counter()
    return QuestionRecord(
        mode=mode,
        sample=sample,
        hits=tuple((h.block.id, h.score) for h in hits),
        ranked_session_ids=rankings.session_ids,
        ranked_turn_ids=rankings.turn_ids,
        retrieved_sessions=rankings.retrieved_sessions,
        retrieved_turns=rankings.retrieved_turns,
        latency_ms={"search": (searched - started) * 1000, "rank_and_score": (done - searched) * 1000},
        scores=scores,
        error=error,
        split=split,
    )


def open_bench(options: RetrievalOptions) -> tuple[DatasetStream, BenchStore, Memory]:
    """Open the data set, its bench store for the options' ingest settings, and a Memory on it
    (close it with ``BenchStore.close``)."""
    stream = open_dataset(options.dataset, options.data_dir)
    family = DATASETS[options.dataset].family
    embedder = make_embedder(options.embedder)
    settings = IngestSettings(resolve_perspective(family, options.perspective), options.embedder, embedder.model_id)
    bench = BenchStore.open(options.cache_dir or default_bench_cache(), DatasetIdentity.of(stream), settings)
    ann = None if options.ann_threshold is None else AnnSettings(threshold=options.ann_threshold, background=False)
    return stream, bench, bench.memory(embedder, ann)


def run_retrieval(
    options: RetrievalOptions, run_dir: Path, *, progress: bool = True, on_batch: OnBatch | None = None
) -> RunOutcome:
    """Ingest (once), evaluate every pending (question, mode), write the log, rankings and reports."""
    _check_options(options)
    check_plotting()
    started = time.perf_counter()
    stream, bench, mem = open_bench(options)
    try:
        ingested = ingest(stream, bench, mem, limit=options.limit, progress=progress, on_batch=on_batch)
        config = resolve_config(options, stream, bench.settings)
        store_info: dict[str, object] = {"key": bench.key, "settings": bench.settings.to_json()}
        header = new_header(config, dataset_record(stream), store_info | bench.manifest.totals())
        log = RunLog.open(Path(run_dir), header, {"ingest": ingested.to_json()})
        written = errors = 0
        already = len(log.done)
        total = options.limit or bench.manifest.samples
        bar = tqdm(desc=f"retrieval {options.dataset}", unit="q", total=total, disable=not progress, leave=False)
        family = DATASETS[options.dataset].family
        split_of = sample_splitter(family, (h.namespace for h in stream))
        # resolve_config checked the baselines and appended them to the modes.
        baselines = {mode: BASELINES[mode] for mode in config.modes if mode in BASELINES}
        terms = TermCache(Vocabulary())
        asked = 0
        try:
            log.calibrate(calibrate(mem.embedder.inner))
            for haystack, samples in questions(stream, options.limit):
                index = HaystackIndex.of(haystack, family)
                ranker: HaystackRanker | None = None
                for sample in samples:
                    for mode in config.modes:
                        if (mode, sample.sample_id) in log.done:
                            continue
                        if mode in baselines:
                            # The cosine baselines embed with the run's embedder and its shared cache.
                            ranker = ranker or HaystackRanker(haystack, family, terms, mem.embedder)
                            record = evaluate_baseline(ranker, sample, index, baselines[mode], config, split_of(sample))
                        else:
                            record = evaluate_question(mem, sample, index, mode, config, split_of(sample))
                        log.write(record)
                        written += 1
                        errors += record.error is not None
                    bar.update(1)
                    asked += 1
                    if asked % CALIBRATE_EVERY == 0:
                        log.calibrate(calibrate(mem.embedder.inner))
            if asked % CALIBRATE_EVERY:
                log.calibrate(calibrate(mem.embedder.inner))
        finally:
            bar.close()
            log.close()
    finally:
        bench.close()
    write_reports(Path(run_dir))
    pack_log(Path(run_dir) / LOG_NAME)
    return RunOutcome(Path(run_dir), ingested, written, already, errors, time.perf_counter() - started)
