"""One question through the QA stages: context, (extraction), answer, lexical scores, judge.

:func:`prepare_retrieved` and :func:`prepare_full` build the context in the run's main thread (the store
is searched from one thread); :func:`process` makes the LLM calls and may run in a worker thread. Every
LLM failure becomes a failure record in the question's :class:`~memlane.bench.qa.qalog.AnswerRecord` and
the scores it prevents are ``None``; nothing is scored 0 for a failed call, nothing is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.model import Haystack, Sample
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.qa.answering import Answer, Answerer, adversarial_question, resolve_choice
from memlane.bench.qa.context import (
    ContextEntry,
    full_context,
    history_end,
    render_context,
    retrieved_entries,
    system_entries,
)
from memlane.bench.qa.judges import LLMJudge
from memlane.bench.qa.qalog import AnswerRecord
from memlane.bench.qa.records import CallUsage, Failure
from memlane.bench.qa.tokens import DEFAULT_COUNTER
from memlane.bench.retrieval.history import HaystackIndex
from memlane.bench.retrieval.run import ask_system, evaluate_question, evaluate_system
from memlane.bench.retrieval.runlog import QuestionRecord, RetrievalConfig
from memlane.bench.systems import System
from memlane.core.errors import LLMError, MemlaneError
from memlane.core.extraction.extractor import ExtractionPrompt, Extractor
from memlane.core.llm import LLM, LLMResult
from memlane.core.llm.chat import ChatCall, ChatLLM
from memlane.core.memory import Memory
from memlane.core.model import MemoryBlock


@dataclass(frozen=True)
class Prepared:
    """A question with its context, ready for the LLM calls. ``entries`` (retrieved, display order) or
    ``text`` (full context) is set; ``blocks`` are the retrieved blocks, one per exchange, best first."""

    index: int
    sample: Sample
    question_date: datetime | None
    context: dict[str, object]
    entries: tuple[ContextEntry, ...] = ()
    text: str | None = None
    blocks: tuple[MemoryBlock, ...] = ()
    errors: tuple[dict[str, object], ...] = ()
    latency_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Stages:
    """What answers and scores a question. ``adversarial`` asks LoCoMo category 5 (None: as any question);
    ``extract`` extracts summary and facts of the retrieved exchanges before answering."""

    family: Family
    answerer: Answerer
    judge: LLMJudge
    adversarial: Answerer | None = None
    extract: ExtractionPrompt | None = None
    facts: bool = False


def _exchange(block: MemoryBlock) -> tuple[str, str, int]:
    return (block.conversation_id, block.session_id, block.exchange_index)


def _one_per_exchange(blocks: Sequence[MemoryBlock]) -> list[MemoryBlock]:
    seen: set[tuple[str, str, int]] = set()
    out: list[MemoryBlock] = []
    for b in blocks:
        if _exchange(b) not in seen:
            seen.add(_exchange(b))
            out.append(b)
    return out


def top_exchanges(blocks: Sequence[MemoryBlock], k: int) -> list[MemoryBlock]:
    """The blocks (rank order) of the ``k`` best-ranked exchanges: the search depth is ``k`` exchanges' worth
    of blocks, but the two perspectives of an exchange need not rank next to each other."""
    keep = {_exchange(b) for b in _one_per_exchange(blocks)[:k]}
    return [b for b in blocks if _exchange(b) in keep]


def prepare_retrieved(
    index: int,
    sample: Sample,
    haystack: Haystack,
    hindex: HaystackIndex,
    mem: Memory,
    config: RetrievalConfig,
    *,
    facts: bool,
) -> Prepared:
    """Search ``sample`` with the retrieval stage of the retrieval benchmark (same depth, same scores) and
    fetch the blocks it found. A failed search is a ``retrieve`` failure: the question is not answered."""
    mode = config.modes[0]
    started = time.perf_counter()
    record = evaluate_question(mem, sample, hindex, mode, config)
    blocks: list[MemoryBlock] = []
    errors: list[dict[str, object]] = []
    if record.error is not None:
        errors.append({"stage": "retrieve", "error": record.error.split(":", 1)[0], "message": record.error})
    else:
        try:
            found = [mem.get(sample.namespace, block_id) for block_id, _ in record.hits]
            blocks = top_exchanges(found, config.ks[0])
        except MemlaneError as exc:
            errors.append({"stage": "retrieve", "error": type(exc).__name__, "message": str(exc)})
    newest_first = DATASETS[config.dataset].family.context_newest_first
    entries = retrieved_entries(blocks, facts=facts, newest_first=newest_first)
    return _retrieved(index, sample, haystack, config, record, mode, entries, errors, started, blocks)


def prepare_system(
    index: int,
    sample: Sample,
    haystack: Haystack,
    hindex: HaystackIndex,
    system: System,
    label: str,
    config: RetrievalConfig,
    *,
    ingest_error: str | None = None,
) -> Prepared:
    """Search ``sample`` through a system under test (``--system``), the retrieval benchmark's own step, and
    show its ``k`` best items as the context: each item's text under its session's date, oldest first, the
    way memlane's blocks are shown. A failed search (or ingest) is a ``retrieve`` failure."""
    started = time.perf_counter()
    asked = ask_system(system, sample, config, ingest_error)
    record = evaluate_system(system, label, sample, hindex, config, asked=asked)
    errors: list[dict[str, object]] = []
    entries: list[ContextEntry] = []
    if record.error is not None:
        errors.append({"stage": "retrieve", "error": record.error.split(":", 1)[0], "message": record.error})
    else:
        newest_first = DATASETS[config.dataset].family.context_newest_first
        entries = system_entries(asked.hits[: config.ks[0]], haystack, newest_first=newest_first)
    return _retrieved(index, sample, haystack, config, record, label, entries, errors, started)


def _retrieved(
    index: int,
    sample: Sample,
    haystack: Haystack,
    config: RetrievalConfig,
    record: QuestionRecord,
    mode: str,
    entries: Sequence[ContextEntry],
    errors: Sequence[dict[str, object]],
    started: float,
    blocks: Sequence[MemoryBlock] = (),
) -> Prepared:
    """A retrieved context's question, ready to answer: what was searched (``mode``: a memlane mode or a
    system's label), the hits, the entries shown, the failures."""
    context: dict[str, object] = {
        "kind": "retrieved",
        "mode": mode,
        "depth": config.depth,
        "hits": [[item_id, round(score, 6)] for item_id, score in record.hits],
        "entries": len(entries),
        "retrieval_scores": record.scores,
    }
    return Prepared(
        index=index,
        sample=sample,
        question_date=sample.question_date or history_end(haystack),
        context=context,
        entries=tuple(entries),
        blocks=tuple(_one_per_exchange(blocks)),
        errors=tuple(errors),
        latency_ms={"retrieve": (time.perf_counter() - started) * 1000},
    )


def prepare_full(index: int, sample: Sample, haystack: Haystack, family: Family, budget: int) -> Prepared:
    """The full-context baseline: the history up to the question, newest turns kept within ``budget``."""
    ctx = full_context(haystack, family, budget=budget, before=sample.question_date)
    return Prepared(
        index=index,
        sample=sample,
        question_date=sample.question_date or history_end(haystack),
        context={"kind": "full"} | ctx.to_json(),
        text=ctx.text,
    )


EXTRACT_MAX_TOKENS = 512
"""Reply limit of an extraction call made by the harness. The core's extractor sets none, and a small model
can loop until its context is full (seen with Qwen2.5-Coder-0.5B: 3,600 tokens, 5 minutes, per try)."""


class RecordingLLM(ChatLLM):
    """Passes calls to ``llm`` and keeps the usage of each (for stages whose API returns no usage).
    ``max_tokens`` is the limit of calls that set none."""

    def __init__(self, llm: LLM, stage: str, *, max_tokens: int | None = None) -> None:
        self.inner = llm
        self.stage = stage
        self.max_tokens = max_tokens
        self.calls: list[tuple[str, CallUsage]] = []
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    def _keep(self, result: LLMResult) -> LLMResult:
        with self._lock:
            self.calls.append((self.stage, CallUsage.of(result)))
        return result

    def _run(self, call: ChatCall) -> LLMResult:
        max_tokens = self.max_tokens if call.max_tokens is None else call.max_tokens
        return self._keep(replace(call, max_tokens=max_tokens).ask(self.inner))


def _extract(
    prepared: Prepared, stages: Stages, errors: list[dict[str, object]]
) -> tuple[list[ContextEntry], list[tuple[str, CallUsage]]]:
    assert stages.extract is not None
    recorder = RecordingLLM(stages.answerer.llm, "extract", max_tokens=EXTRACT_MAX_TOKENS)
    extractor = Extractor(recorder, stages.extract)
    blocks: list[MemoryBlock] = []
    for b in prepared.blocks:
        try:
            result = extractor.extract(b)
        except LLMError as exc:
            failure = Failure.of(
                "extract",
                exc,
                model=recorder.model,
                prompt_id=stages.extract.prompt_id,
                prompt_sha256=stages.extract.sha256,
            )
            errors.append(failure.to_json() | {"block_id": b.id})
            blocks.append(b)
            continue
        blocks.append(replace(b, summary=result.summary, contexts=result.facts))
    return retrieved_entries(blocks, facts=True, newest_first=stages.family.context_newest_first), recorder.calls


def process(prepared: Prepared, stages: Stages, metrics: Sequence[str]) -> AnswerRecord:
    """Answer and score one prepared question (thread-safe when the LLMs are)."""
    sample = prepared.sample
    errors = list(prepared.errors)
    calls: list[tuple[str, CallUsage]] = []
    latency = dict(prepared.latency_ms)
    scores: dict[str, float | None] = dict.fromkeys(metrics)
    context = dict(prepared.context)

    def record(answer: Answer | None = None, hypothesis: str | None = None, verdict: object = None) -> AnswerRecord:
        return AnswerRecord(
            index=prepared.index,
            sample=sample,
            context=context,
            answer=None if answer is None else answer.to_json(),
            hypothesis=hypothesis,
            verdict=verdict if isinstance(verdict, dict) else None,
            scores=scores,
            errors=errors,
            calls=calls,
            latency_ms=latency,
        )

    if errors:
        return record()
    entries: Sequence[ContextEntry] = prepared.entries
    if stages.extract is not None:
        started = time.perf_counter()
        extracted, extract_calls = _extract(prepared, stages, errors)
        entries = extracted
        calls.extend(extract_calls)
        context["extracted_exchanges"] = len(prepared.blocks)
        latency["extract"] = (time.perf_counter() - started) * 1000
    shown = prepared.text if prepared.text is not None else render_context(entries)

    question, options, answerer = sample.question, None, stages.answerer
    if stages.adversarial is not None and sample.category_number == stages.family.adversarial_category:
        gold_premise = sample.adversarial_answer or sample.answer
        question, options = adversarial_question(sample.question, gold_premise, key=sample.sample_id)
        answerer = stages.adversarial
    started = time.perf_counter()
    answer = answerer.answer(question, shown, question_date=prepared.question_date, namespace=sample.namespace)
    latency["answer"] = (time.perf_counter() - started) * 1000
    if isinstance(answer, Failure):
        errors.append(answer.to_json())
        context["tokens"] = DEFAULT_COUNTER.count(shown)
        return record()
    context["tokens"] = answer.context_tokens
    calls.append(("answer", answer.usage))
    hypothesis = resolve_choice(answer.text, options) if options is not None else answer.text
    scores.update(stages.family.lexical_scores(sample, hypothesis))

    started = time.perf_counter()
    verdict = stages.judge.judge(sample, hypothesis, namespace=sample.namespace)
    latency["judge"] = (time.perf_counter() - started) * 1000
    if isinstance(verdict, Failure):
        errors.append(verdict.to_json())
        return record(answer, hypothesis)
    calls.append(("judge", verdict.usage))
    scores["j"] = verdict.score
    return record(answer, hypothesis, verdict.to_json())
