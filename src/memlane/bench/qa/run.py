"""A QA run: ingest once, retrieve (or take the full history), answer, score, log, report.

::

    outcome = run_qa(QAOptions("locomo", k=10, mode="hybrid"), Path("runs/qa"), llm=llm, judge_llm=judge_llm)

The retrieval stage is the retrieval benchmark's own (:func:`memlane.bench.retrieval.run.open_bench`,
:func:`~memlane.bench.retrieval.ingest.ingest`, :func:`~memlane.bench.retrieval.run.evaluate_question`): same
bench store, same depth, same retrieval scores, logged next to each answer. The store is searched from the main thread;
the LLM calls of up to ``concurrency`` questions run in worker threads, and each finished question is
appended to the log at once. An interrupted run resumes from its log (questions already logged are not
asked again) and, with a call log kept by the LLM client, calls that completed before the interruption
are served from the cache rather than sent again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from memlane.bench.datasets.model import Haystack, Sample, questions
from memlane.bench.datasets.registry import DatasetStream, open_dataset
from memlane.bench.qa.answering import Answerer
from memlane.bench.qa.bleu import TOKENIZER_ID
from memlane.bench.qa.judges import LLMJudge, make_judge
from memlane.bench.qa.pipeline import (
    EXTRACT_MAX_TOKENS,
    Prepared,
    Stages,
    prepare_full,
    prepare_retrieved,
    prepare_system,
    process,
)
from memlane.bench.qa.qalog import AnswerRecord, QAHeader, QALog
from memlane.bench.qa.results import QAResults, write_qa_reports
from memlane.bench.qa.runconfig import (
    ADVERSARIAL_PROMPT,
    CONTEXT_FULL,
    CONTEXT_RETRIEVED,
    QAConfig,
    QAOptions,
    check_options,
)
from memlane.bench.qa.tokens import DEFAULT_COUNTER
from memlane.bench.retrieval.history import HaystackIndex
from memlane.bench.retrieval.ingest import BenchStore, IngestReport, dataset_record, default_bench_cache, ingest
from memlane.bench.retrieval.run import build_systems, open_bench, resolve_config
from memlane.bench.retrieval.runlog import RetrievalConfig
from memlane.bench.systems import System
from memlane.core.errors import MemlaneError
from memlane.core.extraction.extractor import ExtractionPrompt
from memlane.core.llm import LLM
from memlane.core.memory import Memory

OnRecord = Callable[[AnswerRecord], None]


@dataclass(frozen=True)
class QAOutcome:
    """What :func:`run_qa` did: its ingest (None for full context), records written now and found logged,
    questions failed among those written, the computed results, wall time."""

    run_dir: Path
    ingest: IngestReport | None
    written: int
    already_logged: int
    failed: int
    results: QAResults
    seconds: float


def build_config(
    options: QAOptions, stages: Stages, llm: LLM, judge: LLMJudge, retrieval: RetrievalConfig | None
) -> QAConfig:
    """The logged config of a run."""
    retrieved = options.context == CONTEXT_RETRIEVED
    return QAConfig(
        dataset=options.dataset,
        family=options.family.name,
        context=options.context,
        k=options.k if retrieved else None,
        mode=(options.system.label if options.system else options.mode) if retrieved else None,
        limit=options.limit,
        answer_prompt=stages.answerer.prompt.describe(),
        adversarial_prompt=stages.adversarial.prompt.describe() if stages.adversarial else None,
        judge=judge.describe() | {"provider": judge.llm.name},
        llm={"provider": llm.name, "model": llm.model},
        facts=stages.facts or stages.extract is not None,
        extract={"prompt_ref": stages.extract.ref, "max_tokens": EXTRACT_MAX_TOKENS} if stages.extract else None,
        before_question_date=options.before_question_date,
        full_context_budget=None if retrieved else options.full_context_budget,
        token_counter=DEFAULT_COUNTER.name,
        bleu_tokenizer=TOKENIZER_ID,
        metrics=options.family.qa_metrics,
        retrieval=asdict(retrieval) if retrieval is not None else None,
    )


@dataclass
class _Tally:
    written: int = 0
    already: int = 0
    failed: int = 0


class _Loop:
    """Prepares questions in order, answers them concurrently, logs each as soon as it is done."""

    def __init__(
        self,
        options: QAOptions,
        stages: Stages,
        log: QALog,
        *,
        mem: Memory | None,
        retrieval: RetrievalConfig | None,
        progress: bool,
        on_record: OnRecord | None,
        system: System | None = None,
    ) -> None:
        self.options = options
        self.system = system
        self.held: str | None = None  # the namespace the system holds
        self.ingest_error: str | None = None
        self.stages = stages
        self.log = log
        self.mem = mem
        self.retrieval = retrieval
        self.metrics = options.family.qa_metrics
        self.on_record = on_record
        self.tally = _Tally()
        total = options.limit
        self.bar = tqdm(desc=f"qa {options.dataset}", unit="q", total=total, disable=not progress, leave=False)

    def prepare(self, index: int, haystack: Haystack, sample: Sample, hindex: HaystackIndex | None) -> Prepared:
        if self.options.context == CONTEXT_FULL:
            return prepare_full(index, sample, haystack, self.options.family, self.options.full_context_budget)
        assert self.mem is not None and self.retrieval is not None and hindex is not None
        if self.system is not None and self.options.system is not None:
            if self.held != haystack.namespace:
                if self.held is not None:
                    self.system.reset(self.held)
                self.held = haystack.namespace
                self.ingest_error = None
                try:
                    self.system.reset(haystack.namespace)
                    self.system.ingest(haystack.namespace, haystack.sessions)
                except MemlaneError as exc:
                    self.ingest_error = f"ingest: {type(exc).__name__}: {exc}"
            label = self.options.system.label
            return prepare_system(
                index, sample, haystack, hindex, self.system, label, self.retrieval, ingest_error=self.ingest_error
            )
        return prepare_retrieved(index, sample, haystack, hindex, self.mem, self.retrieval, facts=self.options.facts)

    def finish(self, future: Future[AnswerRecord]) -> None:
        record = future.result()
        self.log.write(record)
        self.tally.written += 1
        self.tally.failed += record.failed
        self.bar.update(1)
        if self.on_record is not None:
            self.on_record(record)

    def run(self, stream: DatasetStream) -> _Tally:
        window = 2 * self.options.concurrency
        pending: set[Future[AnswerRecord]] = set()
        pool = ThreadPoolExecutor(max_workers=self.options.concurrency, thread_name_prefix="qa")
        hindex: HaystackIndex | None = None
        try:
            asked = ((h, s) for h, samples in questions(stream, self.options.limit) for s in samples)
            for index, (haystack, sample) in enumerate(asked):
                if sample.sample_id in self.log.done:
                    self.tally.already += 1
                    self.bar.update(1)
                    continue
                stale = hindex is None or hindex.namespace != haystack.namespace
                if self.options.context == CONTEXT_RETRIEVED and stale:
                    hindex = HaystackIndex.of(haystack, self.options.family)
                prepared = self.prepare(index, haystack, sample, hindex)
                pending.add(pool.submit(process, prepared, self.stages, self.metrics))
                while len(pending) >= window:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        self.finish(future)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    self.finish(future)
        finally:
            # On an interruption, calls already running complete (and land in the call log's cache); the
            # questions not started are dropped and asked on resume.
            pool.shutdown(wait=True, cancel_futures=True)
            self.bar.close()
        return self.tally


def make_stages(options: QAOptions, llm: LLM, judge_llm: LLM) -> tuple[Stages, LLMJudge]:
    """The answerers, judge and extraction prompt a run uses."""
    judge = make_judge(options.judge_name(), judge_llm)
    stages = Stages(
        family=options.family,
        answerer=Answerer(llm, options.answer_prompt_id()),
        judge=judge,
        adversarial=Answerer(llm, ADVERSARIAL_PROMPT) if options.asks_adversarial() else None,
        extract=ExtractionPrompt.load() if options.extract else None,
        facts=options.facts,
    )
    return stages, judge


def run_qa(
    options: QAOptions,
    run_dir: Path,
    *,
    llm: LLM,
    judge_llm: LLM,
    progress: bool = True,
    on_record: OnRecord | None = None,
) -> QAOutcome:
    """Run (or resume) the QA run ``options`` in ``run_dir`` and write its reports.

    ``llm`` answers (and extracts, with ``extract``); ``judge_llm`` judges. ``on_record`` is called after
    each record is logged: a seam for tests that interrupt a run."""
    check_options(options)
    started = time.perf_counter()
    run_dir = Path(run_dir)
    stages, judge = make_stages(options, llm, judge_llm)
    bench: BenchStore | None = None
    mem: Memory | None = None
    ingested: IngestReport | None = None
    retrieval: RetrievalConfig | None = None
    system: System | None = None
    try:
        if options.context == CONTEXT_RETRIEVED:
            ropts = options.retrieval_options()
            stream, bench, mem = open_bench(ropts)
            ingested = ingest(stream, bench, mem, limit=options.limit, progress=progress)
            work_dir = (options.cache_dir or default_bench_cache()) / "systems"
            _, systems = build_systems(ropts, (), bench, mem, work_dir)
            system = systems[0][1] if systems else None
            retrieval = resolve_config(ropts, stream, bench.settings, systems)
            dataset: dict[str, object] = dataset_record(stream)
            totals: dict[str, object] = dict(bench.manifest.totals())
            store: dict[str, object] | None = {"key": bench.key, "settings": bench.settings.to_json()} | totals
        else:
            stream = open_dataset(options.dataset, options.data_dir)
            dataset, store = dataset_record(stream), None
        config = build_config(options, stages, llm, judge, retrieval)
        header = QAHeader.new(config.to_json(), dataset, store)
        segment: dict[str, object] = {
            "concurrency": options.concurrency,
            "ingest": ingested.to_json() if ingested else None,
        }
        log = QALog.open(run_dir, header, segment, retry_failed=options.retry_failed)
        try:
            loop = _Loop(
                options,
                stages,
                log,
                mem=mem,
                retrieval=retrieval,
                progress=progress,
                on_record=on_record,
                system=system,
            )
            tally = loop.run(stream)
        finally:
            log.close()
    finally:
        if system is not None:
            system.close()
        if bench is not None:
            bench.close()
    results = write_qa_reports(run_dir, bootstrap=options.bootstrap, prices=options.prices)
    return QAOutcome(
        run_dir, ingested, tally.written, tally.already, tally.failed, results, time.perf_counter() - started
    )
