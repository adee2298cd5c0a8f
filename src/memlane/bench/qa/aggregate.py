"""Aggregates of per-question scores: per category and overall, with bootstrap intervals, context and cost.

Every metric (``f1``, ``bleu1``, ``j``, ...) is summarized the same way: the mean over the questions that
have a score, how many have one (``n``) and how many failed (``failed``: the answer or the judge call failed,
so the score is ``None``), and a seeded bootstrap 95% interval (:mod:`memlane.bench.qa.bootstrap`). A failed
question is never averaged in as a zero; reports show the failures next to the mean.

* **LoCoMo** (:func:`locomo_report`): one row per category number, each with its official name and the
  mem0-lineage name. ``overall`` leaves out ``excluded`` categories (category 5 by default: the 1,540
  questions nearly every paper reports, mem0's J included); ``overall_all`` counts every question, the
  official ``evaluation_stats.py`` "overall accuracy". Category 5 keeps its own row.
* **LongMemEval** (:func:`longmemeval_report`): one row per question type (abstention questions count in
  their base type, as ``evaluate_qa.py`` does); ``task_averaged`` is the mean of the per-type means
  (``print_qa_metrics.py``), with a stratified bootstrap; ``abstention`` covers the ``_abs`` questions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memlane.bench.datasets.locomo import CATEGORY_NAMES, MEM0_CATEGORY_NAMES
from memlane.bench.datasets.longmemeval import QUESTION_TYPES
from memlane.bench.datasets.model import Sample
from memlane.bench.qa.bootstrap import BootstrapSettings, bootstrap_ci
from memlane.bench.qa.bootstrap import stratified_bootstrap_ci as _stratified
from memlane.bench.qa.costs import ModelPrice, StageCost, stage_costs, total_cost
from memlane.bench.qa.records import CallUsage
from memlane.core.errors import ValidationError


@dataclass(frozen=True)
class SampleScores:
    """One question's scores as a run log holds them.

    ``scores`` maps a metric to its value, ``None`` when it failed. ``calls`` lists ``(stage, usage)`` for
    every LLM call made for the question; ``context_tokens`` is the estimated size of its context.
    """

    sample_id: str
    category: str
    is_abstention: bool
    scores: Mapping[str, float | None]
    category_number: int | None = None
    category_mem0: str | None = None
    context_tokens: int | None = None
    calls: Sequence[tuple[str, CallUsage]] = ()

    @classmethod
    def of(
        cls,
        sample: Sample,
        scores: Mapping[str, float | None],
        *,
        context_tokens: int | None = None,
        calls: Sequence[tuple[str, CallUsage]] = (),
    ) -> SampleScores:
        """Scores of ``sample``, with its category fields copied."""
        return cls(
            sample.sample_id,
            sample.category,
            sample.is_abstention,
            dict(scores),
            sample.category_number,
            sample.category_mem0,
            context_tokens,
            tuple(calls),
        )


@dataclass(frozen=True)
class MetricSummary:
    """Mean of the scored questions, their count, the failed count and the bootstrap interval."""

    n: int
    failed: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above."""
        return {"n": self.n, "failed": self.failed, "mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high}


@dataclass(frozen=True)
class CategoryRow:
    """One category. ``key`` is the LoCoMo number as text or the LongMemEval type; ``name`` the official
    name; ``mem0_name`` the mem0-lineage label (LoCoMo only); ``excluded``: left out of ``overall``."""

    key: str
    name: str
    metrics: dict[str, MetricSummary]
    number: int | None = None
    mem0_name: str | None = None
    excluded: bool = False

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above."""
        return {
            "key": self.key,
            "name": self.name,
            "number": self.number,
            "mem0_name": self.mem0_name,
            "excluded": self.excluded,
            "metrics": {m: s.to_json() for m, s in self.metrics.items()},
        }


@dataclass(frozen=True)
class QAReport:
    """Aggregates of one run (see the module docstring for what each part covers)."""

    dataset: str
    metrics: tuple[str, ...]
    overall: dict[str, MetricSummary]
    categories: tuple[CategoryRow, ...]
    bootstrap: BootstrapSettings
    questions: int
    excluded: tuple[str, ...] = ()
    overall_all: dict[str, MetricSummary] = field(default_factory=dict)
    task_averaged: dict[str, MetricSummary] = field(default_factory=dict)
    abstention: dict[str, MetricSummary] = field(default_factory=dict)
    mean_context_tokens: float | None = None
    stages: tuple[StageCost, ...] = ()
    cost: float | None = None

    def to_json(self) -> dict[str, object]:
        """The report as one JSON object (the aggregates part of ``results.json``)."""

        def block(summaries: Mapping[str, MetricSummary]) -> dict[str, object]:
            return {m: s.to_json() for m, s in summaries.items()}

        return {
            "dataset": self.dataset,
            "questions": self.questions,
            "metrics": list(self.metrics),
            "overall": block(self.overall),
            "excluded_categories": list(self.excluded),
            "overall_all": block(self.overall_all),
            "categories": [row.to_json() for row in self.categories],
            "task_averaged": block(self.task_averaged),
            "abstention": block(self.abstention),
            "mean_context_tokens": self.mean_context_tokens,
            "stages": [s.to_json() for s in self.stages],
            "cost": self.cost,
            "bootstrap": {
                "resamples": self.bootstrap.resamples,
                "level": self.bootstrap.level,
                "seed": self.bootstrap.seed,
            },
        }


def summarize(values: Sequence[float | None], settings: BootstrapSettings, label: str = "") -> MetricSummary:
    """Summary of one metric over some questions (``None`` = failed)."""
    scored = [v for v in values if v is not None]
    ci = bootstrap_ci(scored, settings, label=label)
    return MetricSummary(
        n=len(scored),
        failed=len(values) - len(scored),
        mean=sum(scored) / len(scored) if scored else None,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
    )


def _summaries(
    rows: Sequence[SampleScores], metrics: Sequence[str], settings: BootstrapSettings, label: str
) -> dict[str, MetricSummary]:
    return {m: summarize([r.scores.get(m) for r in rows], settings, f"{label}/{m}") for m in metrics}


def _group(rows: Iterable[SampleScores], key: Callable[[SampleScores], str]) -> dict[str, list[SampleScores]]:
    groups: dict[str, list[SampleScores]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def _context_and_cost(
    rows: Sequence[SampleScores], prices: Mapping[str, ModelPrice] | None, extra: Iterable[tuple[str, CallUsage]]
) -> tuple[float | None, tuple[StageCost, ...], float | None]:
    tokens = [r.context_tokens for r in rows if r.context_tokens is not None]
    stages = tuple(stage_costs([*(c for r in rows for c in r.calls), *extra], prices))
    return (sum(tokens) / len(tokens) if tokens else None), stages, total_cost(stages)


def locomo_report(
    rows: Sequence[SampleScores],
    *,
    metrics: Sequence[str] = ("f1", "bleu1", "j"),
    excluded: Collection[int] = (5,),
    settings: BootstrapSettings | None = None,
    prices: Mapping[str, ModelPrice] | None = None,
    extra_calls: Iterable[tuple[str, CallUsage]] = (),
) -> QAReport:
    """LoCoMo aggregates; ``rows`` need ``category_number``. ``extra_calls`` adds calls made outside the
    questions (ingest-time extraction, say) to the per-stage figures."""
    settings = settings or BootstrapSettings()
    unnumbered = [r.sample_id for r in rows if r.category_number not in CATEGORY_NAMES]
    if unnumbered:
        raise ValidationError(f"not LoCoMo questions (no category 1-5): {unnumbered[:5]}", where="rows")
    numbered = _group(rows, lambda r: str(r.category_number))
    categories = tuple(
        CategoryRow(
            key=str(number),
            name=CATEGORY_NAMES[number],
            mem0_name=MEM0_CATEGORY_NAMES[number],
            number=number,
            excluded=number in excluded,
            metrics=_summaries(numbered[str(number)], metrics, settings, f"category {number}"),
        )
        for number in sorted(CATEGORY_NAMES)
        if str(number) in numbered
    )
    kept = [r for r in rows if r.category_number not in excluded]
    mean_tokens, stages, cost = _context_and_cost(rows, prices, extra_calls)
    return QAReport(
        dataset="locomo",
        metrics=tuple(metrics),
        overall=_summaries(kept, metrics, settings, "overall"),
        categories=categories,
        bootstrap=settings,
        questions=len(rows),
        excluded=tuple(str(n) for n in sorted(excluded)),
        overall_all=_summaries(rows, metrics, settings, "overall_all"),
        mean_context_tokens=mean_tokens,
        stages=stages,
        cost=cost,
    )


def longmemeval_report(
    rows: Sequence[SampleScores],
    *,
    metrics: Sequence[str] = ("j",),
    settings: BootstrapSettings | None = None,
    prices: Mapping[str, ModelPrice] | None = None,
    extra_calls: Iterable[tuple[str, CallUsage]] = (),
    dataset: str = "longmemeval",
) -> QAReport:
    """LongMemEval aggregates: per type, overall, task-averaged and abstention accuracy."""
    settings = settings or BootstrapSettings()
    by_type = _group(rows, lambda r: r.category)
    order = [t for t in QUESTION_TYPES if t in by_type] + sorted(set(by_type) - set(QUESTION_TYPES))
    categories = tuple(CategoryRow(key=t, name=t, metrics=_summaries(by_type[t], metrics, settings, t)) for t in order)
    task_averaged: dict[str, MetricSummary] = {}
    for m in metrics:
        per_type = [[v for r in by_type[t] if (v := r.scores.get(m)) is not None] for t in order]
        means = [sum(g) / len(g) for g in per_type if g]
        ci = _stratified(per_type, settings, label=f"task/{m}")
        task_averaged[m] = MetricSummary(
            n=sum(len(g) for g in per_type),
            failed=sum(1 for r in rows if r.scores.get(m) is None),
            mean=sum(means) / len(means) if means else None,
            ci_low=ci[0] if ci else None,
            ci_high=ci[1] if ci else None,
        )
    mean_tokens, stages, cost = _context_and_cost(rows, prices, extra_calls)
    return QAReport(
        dataset=dataset,
        metrics=tuple(metrics),
        overall=_summaries(rows, metrics, settings, "overall"),
        categories=categories,
        bootstrap=settings,
        questions=len(rows),
        task_averaged=task_averaged,
        abstention=_summaries([r for r in rows if r.is_abstention], metrics, settings, "abstention"),
        mean_context_tokens=mean_tokens,
        stages=stages,
        cost=cost,
    )
