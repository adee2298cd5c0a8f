"""The outputs of a QA run, computed from its log alone: ``answers.jsonl``, ``results.json``, ``report.md``
and, for LongMemEval, the official ``hypotheses.jsonl``.

``answers.jsonl``: one line per question in data-set order: the id (``question_id`` for LongMemEval,
``qa_id`` = ``<sample_id>:<i>`` as in ``rankings.jsonl`` for LoCoMo), ``question``, ``gold``, ``answer``
(the hypothesis scored), ``category`` (plus ``category_number`` and ``category_mem0`` for LoCoMo),
``f1``, ``bleu1``, ``j`` (and ``mem0_f1`` for LoCoMo; ``null`` where a stage failed), ``judge_prompt_id``,
``context_tokens``, ``failed`` and ``errors``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memlane.bench.datasets.families import Family, ReportInputs, family_named
from memlane.bench.qa.aggregate import MetricSummary, QAReport, SampleScores
from memlane.bench.qa.bootstrap import BootstrapSettings
from memlane.bench.qa.costs import ModelPrice
from memlane.bench.qa.export import write_hypotheses
from memlane.bench.qa.qalog import QA_LOG_NAME, AnswerRecord, QALogContents, read_qa_log

RESULTS_FORMAT = "memlane-bench-qa-results/1"
STAGES = ("retrieve", "extract", "answer", "judge")
METRIC_LABELS = {"f1": "F1", "mem0_f1": "F1 (mem0)", "bleu1": "BLEU-1", "j": "J"}
MAX_LISTED_FAILURES = 20


def _str_list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def sample_scores(record: AnswerRecord) -> SampleScores:
    """A log record as the aggregates take it."""
    tokens = record.context.get("tokens")
    return SampleScores.of(
        record.sample,
        record.scores,
        context_tokens=tokens if isinstance(tokens, int) else None,
        calls=record.calls,
    )


def build_report(
    contents: QALogContents,
    *,
    bootstrap: BootstrapSettings | None = None,
    prices: Mapping[str, ModelPrice] | None = None,
) -> QAReport:
    """The aggregates of a log (per category, overall, CIs, context tokens, stage costs)."""
    config = contents.header.config
    metrics = _str_list(config.get("metrics"))
    rows = [sample_scores(r) for r in contents.records]
    family = family_named(str(config.get("family")))
    return family.qa_report(
        ReportInputs(rows=rows, metrics=metrics, settings=bootstrap, prices=prices, dataset=str(config["dataset"]))
    )


def failure_counts(records: Sequence[AnswerRecord]) -> dict[str, int]:
    """Questions with any failure (``samples``) and failures per stage."""
    counts = dict.fromkeys(("samples", *STAGES), 0)
    for r in records:
        counts["samples"] += r.failed
        for stage in {str(e.get("stage")) for e in r.errors}:
            counts[stage] = counts.get(stage, 0) + 1
    return counts


def judge_summary(contents: QALogContents) -> dict[str, object]:
    """The judge: name, model, and every prompt used with its sha256 and how many questions it judged.
    ``prompt_id``/``prompt_sha256`` are also given at the top when a single prompt judged every question."""
    judge = contents.header.config.get("judge")
    judge = judge if isinstance(judge, dict) else {}
    used: dict[tuple[str, str], int] = {}
    models: set[str] = set()
    for r in contents.records:
        if r.verdict is not None:
            key = (str(r.verdict.get("prompt_id")), str(r.verdict.get("prompt_sha256")))
            used[key] = used.get(key, 0) + 1
            models.add(str(r.verdict.get("model")))
    prompts = [{"prompt_id": pid, "prompt_sha256": sha, "questions": n} for (pid, sha), n in sorted(used.items())]
    single = prompts[0] if len(prompts) == 1 else None
    return {
        "name": judge.get("judge"),
        "provider": judge.get("provider"),
        "model": judge.get("model"),
        "models_seen": sorted(models),
        "prompt_id": single["prompt_id"] if single else None,
        "prompt_sha256": single["prompt_sha256"] if single else None,
        "prompts": prompts,
        "prompts_available": judge.get("prompts"),
    }


def answer_line(record: AnswerRecord, family: Family) -> dict[str, object]:
    """One line of ``answers.jsonl``."""
    s = record.sample
    line: dict[str, object] = {family.id_key: s.sample_id, "question": s.question, "gold": s.answer}
    line |= {"answer": record.hypothesis} | family.answer_fields(s)
    line |= dict(record.scores)
    line |= {
        "judge_prompt_id": record.verdict.get("prompt_id") if record.verdict else None,
        "context_tokens": record.context.get("tokens"),
        "failed": record.failed,
        "errors": record.errors,
    }
    return line


@dataclass(frozen=True)
class QAResults:
    """Everything written for a run: the report and the ``results.json`` object."""

    report: QAReport
    results: dict[str, object]


def compute_results(
    contents: QALogContents,
    *,
    bootstrap: BootstrapSettings | None = None,
    prices: Mapping[str, ModelPrice] | None = None,
) -> QAResults:
    """The ``results.json`` object of a log."""
    header = contents.header
    config = header.config
    report = build_report(contents, bootstrap=bootstrap, prices=prices)
    tokens_ok = [r for r in contents.records if isinstance(r.context.get("tokens"), int)]
    truncated = sum(1 for r in contents.records if r.context.get("truncated") is True)
    results: dict[str, object] = {
        "format": RESULTS_FORMAT,
        "dataset": header.dataset,
        "config": config,
        "answer_prompt": config.get("answer_prompt"),
        "adversarial_prompt": config.get("adversarial_prompt"),
        "judge": judge_summary(contents),
        "llm": config.get("llm"),
        "questions": len(contents.records),
        "failed": failure_counts(contents.records),
        "context": {
            "kind": config.get("context"),
            "mean_tokens": report.mean_context_tokens,
            "questions_with_tokens": len(tokens_ok),
            "truncated": truncated,
            "token_counter": config.get("token_counter"),
        },
        "aggregates": report.to_json(),
        "store": header.store,
        "git_revision": header.git_revision,
        "packages": header.packages,
        "segments": len(contents.segments),
    }
    return QAResults(report, results)


def _cell(summary: MetricSummary | None) -> str:
    if summary is None or summary.mean is None:
        return "–"
    ci = f" [{summary.ci_low:.3f}, {summary.ci_high:.3f}]" if summary.ci_low is not None else ""
    return f"{summary.mean:.3f}{ci}"


def format_table(report: QAReport) -> str:
    """Per-category rows, then the overall rows: mean [95% CI] of each metric, scored and failed counts."""
    metrics = list(report.metrics)
    head = ["group", "n", "failed", *(METRIC_LABELS.get(m, m) for m in metrics)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]

    def row(label: str, summaries: Mapping[str, MetricSummary], n: int) -> None:
        failed = max((s.failed for s in summaries.values()), default=0)
        cells = [_cell(summaries.get(m)) for m in metrics]
        lines.append(f"| {label} | {n} | {failed} | " + " | ".join(cells) + " |")

    def count(summaries: Mapping[str, MetricSummary]) -> int:
        return max((s.n + s.failed for s in summaries.values()), default=0)

    for c in report.categories:
        label = f"{c.key} {c.name}" if c.number is not None else c.name
        if c.mem0_name:
            label += f" [mem0: {c.mem0_name}]"
        if c.excluded:
            label += " (excluded from overall)"
        row(label, c.metrics, count(c.metrics))
    if report.excluded:
        row(f"**overall** (without {', '.join(report.excluded)})", report.overall, count(report.overall))
        row("overall, all categories", report.overall_all, count(report.overall_all))
    else:
        row("**overall**", report.overall, count(report.overall))
    if report.task_averaged:
        row("task-averaged", report.task_averaged, count(report.task_averaged))
    if report.abstention and count(report.abstention):
        row("abstention (_abs)", report.abstention, count(report.abstention))
    return "\n".join(lines)


def format_stages(report: QAReport) -> str:
    """Calls, tokens and cost per stage."""
    lines = [
        "| stage | models | calls | cached | tokens in | tokens out | no usage | cost |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in report.stages:
        cost = "–" if s.cost is None else f"{s.cost:.4f}"
        lines.append(
            f"| {s.stage} | {', '.join(s.models)} | {s.calls} | {s.cached_calls} | {s.tokens_in} | {s.tokens_out} "
            f"| {s.unreported} | {cost} |"
        )
    return "\n".join(lines)


def format_report(contents: QALogContents, computed: QAResults) -> str:
    """``report.md``."""
    res = computed.results
    config = contents.header.config
    judge = judge_summary(contents)
    answer = config.get("answer_prompt")
    answer = answer if isinstance(answer, dict) else {}
    failed = failure_counts(contents.records)
    ctx = res["context"]
    assert isinstance(ctx, dict)
    setting = (
        f"retrieved, k={config.get('k')} exchanges, mode {config.get('mode')}"
        if config.get("context") == "retrieved"
        else f"full history, budget {config.get('full_context_budget')} tokens ({ctx['truncated']} truncated)"
    )
    mean_tokens = ctx["mean_tokens"]
    parts = [
        f"# QA run: {config.get('dataset')}",
        "",
        f"- context: {setting}; mean context tokens "
        f"{'–' if mean_tokens is None else f'{mean_tokens:.0f}'} ({ctx['token_counter']})",
        f"- answer prompt: `{answer.get('prompt_id')}` (sha256 `{answer.get('prompt_sha256')}`)",
        f"- answering model: {_model(config.get('llm'))}; judge `{judge['name']}`, model {judge['model']}",
        f"- questions: {res['questions']}; failed: {failed['samples']}{_by_stage(failed)}",
        "",
        "## Scores (mean [bootstrap 95% CI])",
        "",
        format_table(computed.report),
        "",
        "## Judge prompts used",
        "",
        "| prompt | sha256 | questions |",
        "|---|---|---:|",
        *(f"| `{p['prompt_id']}` | `{p['prompt_sha256']}` | {p['questions']} |" for p in _dicts(judge["prompts"])),
        "",
        "## Tokens and cost per stage",
        "",
        format_stages(computed.report),
    ]
    failures = [r for r in contents.records if r.failed][:MAX_LISTED_FAILURES]
    if failures:
        parts += ["", "## Failures", ""]
        for r in failures:
            for e in r.errors:
                message = str(e.get("message"))[:200]
                parts.append(f"- {r.sample.sample_id}: {e.get('stage')}: {e.get('error')}: {message}")
    return "\n".join(parts) + "\n"


def _by_stage(failed: Mapping[str, int]) -> str:
    stages = ", ".join(f"{k} {v}" for k, v in failed.items() if k != "samples" and v)
    return f" ({stages})" if stages else ""


def _model(llm: object) -> str:
    return str(llm.get("model")) if isinstance(llm, dict) else "?"


def _dicts(value: object) -> list[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def write_qa_reports(
    run_dir: Path, *, bootstrap: BootstrapSettings | None = None, prices: Mapping[str, ModelPrice] | None = None
) -> QAResults:
    """Write ``answers.jsonl``, ``results.json``, ``report.md`` (and ``hypotheses.jsonl`` for LongMemEval)
    from the run's log. Hypotheses are written for the questions that have an answer; ``results.json``
    counts the ones left out."""
    run_dir = Path(run_dir)
    contents = read_qa_log(run_dir / QA_LOG_NAME)
    computed = compute_results(contents, bootstrap=bootstrap, prices=prices)
    family = family_named(str(contents.header.config.get("family")))
    with (run_dir / "answers.jsonl").open("w", encoding="utf-8") as f:
        for r in contents.records:
            f.write(json.dumps(answer_line(r, family), ensure_ascii=False) + "\n")
    if family.hypotheses_file:
        pairs = [(r.sample.sample_id, r.hypothesis) for r in contents.records if r.hypothesis is not None]
        written = write_hypotheses(run_dir / "hypotheses.jsonl", pairs)
        computed.results["hypotheses"] = {"written": written, "left_out_failed": len(contents.records) - written}
    (run_dir / "results.json").write_text(json.dumps(computed.results, indent=2) + "\n", encoding="utf-8")
    (run_dir / "report.md").write_text(format_report(contents, computed), encoding="utf-8")
    return computed
