"""What a QA run is asked to do (:class:`QAOptions`) and the resolved settings its log records (:class:`QAConfig`).

A QA run = data set + context (retrieved blocks at ``k`` in one search ``mode``, or the full history under a
token budget) + answer prompt + judge. ``auto`` picks the data set family's defaults
(:mod:`memlane.bench.datasets.families`):

* answer prompt: ``locomo-short-answer-v1`` (LoCoMo), ``lme-reader-con-v1`` (LongMemEval's Chain-of-Note
  reader, the paper's best reading setting);
* judge: ``locomo-mem0`` (the "J" of the mem0-lineage tables) for LoCoMo, the official ``longmemeval``
  judge for LongMemEval;
* metrics: LoCoMo's official F1 first (then mem0's F1, BLEU-1, J), LongMemEval's J first (then F1, BLEU-1).

LoCoMo category 5 is asked as the official two-option question (``locomo-adversarial-v1``) unless
``adversarial`` is off, in which case it gets the run's answer prompt like any other question.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.qa.bootstrap import BootstrapSettings
from memlane.bench.qa.costs import ModelPrice
from memlane.bench.qa.judges import JUDGES
from memlane.bench.qa.prompts import PromptKind, get_prompt
from memlane.bench.retrieval.run import RetrievalOptions
from memlane.bench.retrieval.runlog import DEFAULT_EMBEDDER
from memlane.bench.systems import SystemSpec
from memlane.core.errors import ConfigError
from memlane.core.retrieval import MAX_K, resolve_settings

AUTO = "auto"
CONTEXT_RETRIEVED = "retrieved"
CONTEXT_FULL = "full"
CONTEXTS = (CONTEXT_RETRIEVED, CONTEXT_FULL)
DEFAULT_K = 10
DEFAULT_MODE = "hybrid"
DEFAULT_CONCURRENCY = 4
# Tokens by the approximate counter (4 characters each): a LoCoMo conversation (~26k) fits whole; a
# LongMemEval-S haystack (~115k) is cut to its newest part, within a 128k-context reader.
DEFAULT_FULL_CONTEXT_BUDGET = 100_000
ADVERSARIAL_PROMPT = "locomo-adversarial-v1"


@dataclass(frozen=True)
class QAOptions:
    """What a caller asks for. ``k`` counts exchanges (in speakers/dual mode twice as many blocks are
    retrieved; perspectives sharing a text are shown once). ``facts`` shows the summary and facts stored on
    the blocks; ``extract`` extracts them at answer time for the retrieved exchanges only (one call per
    exchange, cached), for stores ingested without extraction. ``concurrency`` bounds questions in flight.
    ``retry_failed`` asks again, on resume, the questions whose logged record has an error."""

    dataset: str
    context: str = CONTEXT_RETRIEVED
    k: int = DEFAULT_K
    mode: str = DEFAULT_MODE
    limit: int | None = None
    answer_prompt: str = AUTO
    judge: str = AUTO
    adversarial: bool = True
    concurrency: int = DEFAULT_CONCURRENCY
    full_context_budget: int = DEFAULT_FULL_CONTEXT_BUDGET
    facts: bool = False
    extract: bool = False
    before_question_date: bool = False
    embedder: str = DEFAULT_EMBEDDER
    perspective: str = AUTO
    data_dir: Path | None = None
    cache_dir: Path | None = None
    retry_failed: bool = False
    system: SystemSpec | None = None
    bootstrap: BootstrapSettings = field(default_factory=BootstrapSettings)
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)

    @property
    def family(self) -> Family:
        """The data set's family."""
        return DATASETS[self.dataset].family

    def answer_prompt_id(self) -> str:
        """The answer prompt, ``auto`` resolved."""
        return self.family.answer_prompt if self.answer_prompt == AUTO else self.answer_prompt

    def judge_name(self) -> str:
        """The judge, ``auto`` resolved."""
        return self.family.judge if self.judge == AUTO else self.judge

    def asks_adversarial(self) -> bool:
        """Whether the family's false-premise category (LoCoMo's 5) gets the official two-option question."""
        return self.adversarial and self.family.adversarial_category is not None

    def retrieval_options(self) -> RetrievalOptions:
        """The retrieval stage's options: one mode (or the ``system``), one k."""
        return RetrievalOptions(
            dataset=self.dataset,
            modes=() if self.system else (self.mode,),
            systems=(self.system,) if self.system else (),
            ks=(self.k,),
            limit=self.limit,
            before_question_date=self.before_question_date,
            embedder=self.embedder,
            perspective=self.perspective,
            data_dir=self.data_dir,
            cache_dir=self.cache_dir,
        )


def check_options(options: QAOptions) -> None:
    """Raise ConfigError naming the first bad option."""
    if options.dataset not in DATASETS:
        raise ConfigError(f"unknown data set {options.dataset!r}; known: {', '.join(DATASETS)}")
    if options.context not in CONTEXTS:
        raise ConfigError(f"--context must be one of {', '.join(CONTEXTS)}, got {options.context!r}")
    if not 1 <= options.k <= MAX_K:
        raise ConfigError(f"--k must be from 1 to {MAX_K}, got {options.k}")
    resolve_settings(options.mode)
    if options.limit is not None and options.limit < 1:
        raise ConfigError(f"--limit must be positive, got {options.limit}")
    if options.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {options.concurrency}")
    if options.full_context_budget < 1:
        raise ConfigError(f"the full-context budget must be positive, got {options.full_context_budget}")
    if get_prompt(options.answer_prompt_id()).kind is not PromptKind.ANSWER:
        raise ConfigError(f"--answer-prompt {options.answer_prompt_id()} is not an answer prompt")
    if options.judge_name() not in JUDGES:
        raise ConfigError(f"unknown judge {options.judge_name()!r}; known: {', '.join(sorted(JUDGES))}")
    if options.extract and options.context != CONTEXT_RETRIEVED:
        raise ConfigError("--extract works on retrieved blocks; it needs --context retrieved")
    if options.system is not None and options.context != CONTEXT_RETRIEVED:
        raise ConfigError("--system answers from a system's search; it needs --context retrieved")
    if options.system is not None and (options.extract or options.facts):
        raise ConfigError("--extract and --facts read memlane's blocks; a --system context has none")


@dataclass(frozen=True)
class QAConfig:
    """The resolved settings of a run, as its log header records them (no paths, nothing machine-specific).

    A resumed run must resolve to the same config, so one log never mixes settings. Concurrency, prices and
    bootstrap settings are not part of it: they change neither a call nor a score.
    """

    dataset: str
    family: str
    context: str
    k: int | None
    mode: str | None
    limit: int | None
    answer_prompt: dict[str, str]
    adversarial_prompt: dict[str, str] | None
    judge: dict[str, object]
    llm: dict[str, str]
    facts: bool
    extract: dict[str, object] | None
    before_question_date: bool
    full_context_budget: int | None
    token_counter: str
    bleu_tokenizer: str
    metrics: tuple[str, ...]
    retrieval: dict[str, object] | None

    def to_json(self) -> dict[str, object]:
        """The config as a JSON object (tuples as lists)."""
        return {
            "dataset": self.dataset,
            "family": self.family,
            "context": self.context,
            "k": self.k,
            "mode": self.mode,
            "limit": self.limit,
            "answer_prompt": self.answer_prompt,
            "adversarial_prompt": self.adversarial_prompt,
            "judge": self.judge,
            "llm": self.llm,
            "facts": self.facts,
            "extract": self.extract,
            "before_question_date": self.before_question_date,
            "full_context_budget": self.full_context_budget,
            "token_counter": self.token_counter,
            "bleu_tokenizer": self.bleu_tokenizer,
            "metrics": list(self.metrics),
            "retrieval": self.retrieval,
        }
