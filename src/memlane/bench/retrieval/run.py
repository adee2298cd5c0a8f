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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from memlane.bench.datasets.model import Sample, Session, questions
from memlane.bench.datasets.registry import DATASETS, DatasetStream, open_dataset
from memlane.bench.reports.plot import check_plotting
from memlane.bench.reports.report import write_reports
from memlane.bench.retrieval.baselines import BASELINES, check_baselines
from memlane.bench.retrieval.history import HaystackIndex, Rankings, blocks_per_exchange, pad, resolve_perspective
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
from memlane.bench.systems import Hit, System, SystemContext, SystemSpec, make_system
from memlane.bench.systems.baselines import BaselineSystem, SharedRankers
from memlane.bench.systems.memlane import MemlaneSystem
from memlane.bench.systems.memlane import end_of_day as end_of_day  # callers from before systems import it here
from memlane.core.embedding.protocol import make_embedder
from memlane.core.errors import ConfigError, MemlaneError, ValidationError
from memlane.core.memory import Memory
from memlane.core.retrieval import MAX_K, resolve_settings
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.settings import embedder_config_from_env

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
    ``per_category``: only the first N questions of each category (in data-set order) and the namespaces
    they need, with ``limit`` applied after it: a sample that weighs every category alike.
    ``categories``: only the questions of these categories (none: all), and the namespaces they need (the
    report's per-category rows show which were asked).
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
    systems: tuple[SystemSpec, ...] = ()
    ann_threshold: int | None = None
    per_category: int | None = None
    categories: tuple[str, ...] = ()


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
    if not options.modes and not options.systems:
        raise ConfigError("no search mode or system given")
    if len(set(options.modes)) != len(options.modes):
        raise ConfigError(f"search modes repeat: {options.modes}")
    labels = [*options.modes, *options.baselines, *(s.label for s in options.systems)]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValidationError(
            f"two modes, baselines or systems share the name {repeated[0]!r} (name a system with as=)"
        )
    for mode in options.modes:
        resolve_settings(mode)
    if options.baselines:
        # Baseline names never collide with preset names (check_baselines knows only baselines).
        check_baselines(options.dataset, options.baselines)
    if not options.ks or any(k < 1 for k in options.ks):
        raise ConfigError(f"k values must be positive integers, got {options.ks}")
    if options.limit is not None and options.limit < 1:
        raise ConfigError(f"--limit must be positive, got {options.limit}")
    if options.per_category is not None and options.per_category < 1:
        raise ConfigError(f"--per-category must be positive, got {options.per_category}")
    if options.depth is not None and not 1 <= options.depth <= MAX_K:
        raise ConfigError(f"--depth must be from 1 to {MAX_K}, got {options.depth}")


def run_depth(options: RetrievalOptions, settings: IngestSettings) -> int:
    """Items asked per question: ``--depth``, else ``max(ks)`` exchanges' worth of blocks."""
    return options.depth or min(MAX_K, max(options.ks) * blocks_per_exchange(settings.perspective))


def resolve_config(
    options: RetrievalOptions,
    stream: DatasetStream,
    settings: IngestSettings,
    systems: Sequence[tuple[str, System]] = (),
) -> RetrievalConfig:
    """The full, logged config of a run (no paths); ``systems`` are the ``--system`` ones, by label."""
    ks = tuple(sorted(set(options.ks)))
    depth = run_depth(options, settings)
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
    for label, system in systems:
        search[label] = system.settings()
    return RetrievalConfig(
        dataset=options.dataset,
        modes=options.modes + tuple(b.name for b in baselines) + tuple(label for label, _ in systems),
        ks=ks,
        limit=options.limit,
        per_category=options.per_category,
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


def rank_hits(hits: Sequence[Hit], index: HaystackIndex, min_length: int, *, cut: bool = False) -> Rankings:
    """Session and turn rankings implied by a system's hits in rank order, padded to ``min_length`` (or the
    whole haystack). Sessions follow the hits' sessions; turns are the hits' target turns (the index's),
    de-duplicated in rank order. ``cut`` keeps at most ``min_length`` retrieved entries (the baselines);
    otherwise every retrieved entry is kept. Padding appends the namespace's remaining sessions / target
    turns in haystack order: what a ranker that scores them all zero returns."""
    targets = set(index.turn_ids)
    sessions: dict[str, None] = {}
    turns: dict[str, None] = {}
    for hit in hits:
        sessions.setdefault(hit.session_id)
        for turn_id in hit.turn_ids:
            if turn_id in targets:
                turns.setdefault(turn_id)
    session_length = min(min_length, len(index.session_ids))
    turn_length = min(min_length, len(index.turn_ids))
    ranked_sessions = list(sessions)[:session_length] if cut else list(sessions)
    ranked_turns = list(turns)[:turn_length] if cut else list(turns)
    return Rankings(
        session_ids=pad(ranked_sessions, index.session_ids, session_length),
        turn_ids=pad(ranked_turns, index.turn_ids, turn_length),
        retrieved_sessions=len(ranked_sessions),
        retrieved_turns=len(ranked_turns),
    )


@dataclass(frozen=True)
class Asked:
    """A system's answer to one question: its hits, the error if it failed, how long the search took."""

    hits: list[Hit]
    error: str | None
    ms: float


def ask_system(system: System, sample: Sample, config: RetrievalConfig, ingest_error: str | None = None) -> Asked:
    """Search one question; a failure (of the search, or of the namespace's ingest) is an error, not a crash."""
    started = time.perf_counter()
    if ingest_error is not None:
        return Asked([], ingest_error, 0.0)
    try:
        hits = system.search(sample.namespace, sample.question, config.depth, sample.question_date)
        error = None
    except MemlaneError as exc:
        hits, error = [], f"{type(exc).__name__}: {exc}"
    return Asked(hits, error, (time.perf_counter() - started) * 1000)


def evaluate_system(
    system: System,
    label: str,
    sample: Sample,
    index: HaystackIndex,
    config: RetrievalConfig,
    split: str | None = None,
    *,
    ingest_ms: float | None = None,
    ingest_error: str | None = None,
    asked: Asked | None = None,
) -> QuestionRecord:
    """Ask one question of one system, rank its turns and sessions, score them: the one path every mode,
    baseline and system takes. A failed search (or a failed ingest of the namespace) is logged as an error
    with padding-only rankings (scored like any ranking: it counts, it is not skipped). ``ingest_ms`` (the
    first question of a namespace) is what ingesting the namespace into the system took; ``asked``: the
    search already made (:func:`ask_system`)."""
    asked = asked or ask_system(system, sample, config, ingest_error)
    searched = time.perf_counter()
    rankings = rank_hits(asked.hits, index, config.min_length, cut=system.cuts_rankings)
    turn_ids = rankings.turn_ids if system.ranks_turns else None
    before = None
    if isinstance(system, MemlaneSystem):
        # Supersession reorders without rescoring, so the hits by score are the ranking before it: the
        # scores then say what it moved (supersession's audit; nothing for a mode without it).
        unmoved = rank_hits(sorted(asked.hits, key=lambda h: -h.score), index, config.min_length)
        before = (unmoved.session_ids, unmoved.turn_ids)
    scores = DATASETS[config.dataset].family.score(
        sample, rankings.session_ids, turn_ids, config.ks, session_dates=index.session_dates, before=before
    )
    done = time.perf_counter()
    latency = {"search": asked.ms, "rank_and_score": (done - searched) * 1000}
    if ingest_ms is not None:
        latency["ingest"] = ingest_ms
    return QuestionRecord(
        mode=label,
        sample=sample,
        hits=tuple((h.item_id, h.score) for h in asked.hits[: config.depth]),
        ranked_session_ids=rankings.session_ids,
        ranked_turn_ids=turn_ids or (),
        retrieved_sessions=rankings.retrieved_sessions,
        retrieved_turns=rankings.retrieved_turns if system.ranks_turns else 0,
        latency_ms=latency,
        scores=scores,
        error=asked.error,
        split=split,
    )


def evaluate_question(
    mem: Memory,
    sample: Sample,
    index: HaystackIndex,
    mode: str,
    config: RetrievalConfig,
    split: str | None = None,
) -> QuestionRecord:
    """Search one question in one memlane search mode (:func:`evaluate_system` with memlane's system)."""
    system = MemlaneSystem(mem, mode, before_question_date=config.before_question_date)
    return evaluate_system(system, mode, sample, index, config, split)


def open_bench(options: RetrievalOptions) -> tuple[DatasetStream, BenchStore, Memory]:
    """Open the data set, its bench store for the options' ingest settings, and a Memory on it
    (close it with ``BenchStore.close``)."""
    stream = open_dataset(options.dataset, options.data_dir).per_category(options.per_category)
    stream = stream.only_categories(options.categories)
    family = DATASETS[options.dataset].family
    embedder = make_embedder(options.embedder, embedder_config_from_env())
    settings = IngestSettings(resolve_perspective(family, options.perspective), options.embedder, embedder.model_id)
    bench = BenchStore.open(options.cache_dir or default_bench_cache(), DatasetIdentity.of(stream), settings)
    ann = None if options.ann_threshold is None else AnnSettings(threshold=options.ann_threshold, background=False)
    return stream, bench, bench.memory(embedder, ann)


def build_systems(
    options: RetrievalOptions, modes: Sequence[str], bench: BenchStore, mem: Memory, work_dir: Path
) -> tuple[dict[str, System], list[tuple[str, System]]]:
    """Every mode of the run as a system, by label: memlane's presets, the baselines, then the ``--system``
    ones (also returned apart, for the logged config)."""
    family = DATASETS[options.dataset].family
    depth = run_depth(options, bench.settings)
    rankers = SharedRankers(family, mem.embedder)
    context = SystemContext(family, mem.embedder, work_dir, depth, {"memory": mem, "baseline_rankers": rankers})
    systems: dict[str, System] = {}
    for mode in modes:
        if mode in BASELINES:
            systems[mode] = BaselineSystem(BASELINES[mode], rankers)
        else:
            systems[mode] = MemlaneSystem(mem, mode, before_question_date=options.before_question_date)
    extra: list[tuple[str, System]] = []
    try:
        for spec in options.systems:
            system = make_system(spec, context)
            extra.append((spec.label, system))
    except BaseException:
        for _, system in extra:
            system.close()
        raise
    systems.update(extra)
    return systems, extra


@dataclass
class _Ingested:
    """A system's ingest of the current namespace: how long it took, or why it failed."""

    ms: float | None = None
    error: str | None = None


def _ingest_namespace(system: System, namespace: str, sessions: Sequence[Session]) -> _Ingested:
    started = time.perf_counter()
    try:
        system.reset(namespace)
        system.ingest(namespace, sessions)
    except MemlaneError as exc:
        return _Ingested(None, f"ingest: {type(exc).__name__}: {exc}")
    return _Ingested((time.perf_counter() - started) * 1000)


def run_retrieval(
    options: RetrievalOptions, run_dir: Path, *, progress: bool = True, on_batch: OnBatch | None = None
) -> RunOutcome:
    """Ingest (once), evaluate every pending (question, mode), write the log, rankings and reports.

    memlane's modes search the ingest-once bench store; every other system (baselines, ``--system``
    peers) is given each namespace's sessions when its first pending question comes, and reset after
    the namespace's questions."""
    _check_options(options)
    check_plotting()
    started = time.perf_counter()
    stream, bench, mem = open_bench(options)
    systems: dict[str, System] = {}
    try:
        ingested = ingest(stream, bench, mem, limit=options.limit, progress=progress, on_batch=on_batch)
        work_dir = (options.cache_dir or default_bench_cache()) / "systems"
        baselines = check_baselines(options.dataset, options.baselines) if options.baselines else ()
        systems, extra = build_systems(options, options.modes + tuple(b.name for b in baselines), bench, mem, work_dir)
        config = resolve_config(options, stream, bench.settings, extra)
        store_info: dict[str, object] = {"key": bench.key, "settings": bench.settings.to_json()}
        header = new_header(config, dataset_record(stream), store_info | bench.manifest.totals())
        log = RunLog.open(Path(run_dir), header, {"ingest": ingested.to_json()})
        written = errors = 0
        already = len(log.done)
        total = None if options.per_category else options.limit or bench.manifest.samples
        bar = tqdm(desc=f"retrieval {options.dataset}", unit="q", total=total, disable=not progress, leave=False)
        family = DATASETS[options.dataset].family
        split_of = sample_splitter(family, (h.namespace for h in stream))
        asked = 0
        try:
            log.calibrate(calibrate(mem.embedder.inner))
            for haystack, samples in questions(stream, options.limit):
                index = HaystackIndex.of(haystack, family)
                namespace: dict[str, _Ingested] = {}
                for sample in samples:
                    for mode in config.modes:
                        if (mode, sample.sample_id) in log.done:
                            continue
                        system = systems[mode]
                        first = False
                        if not isinstance(system, MemlaneSystem) and mode not in namespace:
                            namespace[mode] = _ingest_namespace(system, haystack.namespace, haystack.sessions)
                            first = True
                        state = namespace.get(mode, _Ingested())
                        record = evaluate_system(
                            system,
                            mode,
                            sample,
                            index,
                            config,
                            split_of(sample),
                            ingest_ms=state.ms if first else None,
                            ingest_error=state.error,
                        )
                        log.write(record)
                        written += 1
                        errors += record.error is not None
                    bar.update(1)
                    asked += 1
                    if asked % CALIBRATE_EVERY == 0:
                        log.calibrate(calibrate(mem.embedder.inner))
                for mode in namespace:
                    systems[mode].reset(haystack.namespace)
            if asked % CALIBRATE_EVERY:
                log.calibrate(calibrate(mem.embedder.inner))
        finally:
            bar.close()
            log.close()
    finally:
        for system in systems.values():
            system.close()
        bench.close()
    write_reports(Path(run_dir))
    pack_log(Path(run_dir) / LOG_NAME)
    return RunOutcome(Path(run_dir), ingested, written, already, errors, time.perf_counter() - started)
