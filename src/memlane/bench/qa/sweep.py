"""A sweep: a grid (k x search mode x answer prompt) run as a list of ordinary QA runs over one bench store.

Each run is :func:`~memlane.bench.qa.run.run_qa` with one setting changed, in ``OUT/<name>/`` (resumable
like any run); the store is ingested by the first run and reused by the others (same ingest settings), and
the shared call log makes repeated calls free. ``OUT/sweep.json`` lists the runs (the plan, written before
the first one starts) and ``OUT/sweep.md`` compares their overall scores, computed from their results.
With ``full_context``, one full-context run per answer prompt is added as the baseline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from memlane.bench.datasets.families import FAMILIES, LOCOMO
from memlane.bench.qa.run import QAOutcome, run_qa
from memlane.bench.qa.runconfig import CONTEXT_FULL, CONTEXT_RETRIEVED, QAOptions
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.llm import LLM

SWEEP_FORMAT = "memlane-bench-qa-sweep/1"


@dataclass(frozen=True)
class SweepGrid:
    """The values swept; every combination is one run."""

    ks: tuple[int, ...]
    modes: tuple[str, ...]
    answer_prompts: tuple[str, ...]
    full_context: bool = False

    def __post_init__(self) -> None:
        if not self.ks or not self.modes or not self.answer_prompts:
            raise ConfigError("a sweep needs at least one k, one mode and one answer prompt")


def run_name(options: QAOptions) -> str:
    """The folder name of one run: ``k10-hybrid-locomo-short-answer-v1`` or ``full-<prompt>``."""
    prompt = options.answer_prompt_id()
    if options.context == CONTEXT_FULL:
        return f"full-{prompt}"
    return f"k{options.k}-{options.mode}-{prompt}"


def plan(base: QAOptions, grid: SweepGrid) -> list[QAOptions]:
    """The runs of a sweep, in order: every (k, mode, prompt), then the full-context baselines."""
    runs = [
        replace(base, context=CONTEXT_RETRIEVED, k=k, mode=mode, answer_prompt=prompt)
        for prompt in dict.fromkeys(grid.answer_prompts)
        for mode in dict.fromkeys(grid.modes)
        for k in dict.fromkeys(grid.ks)
    ]
    if grid.full_context:
        runs += [replace(base, context=CONTEXT_FULL, answer_prompt=p) for p in dict.fromkeys(grid.answer_prompts)]
    return runs


@dataclass(frozen=True)
class SweepOutcome:
    """The runs of a sweep and the comparison written."""

    out_dir: Path
    runs: list[tuple[str, QAOutcome]]
    report: str


def run_sweep(
    base: QAOptions,
    grid: SweepGrid,
    out_dir: Path,
    *,
    llm: LLM,
    judge_llm: LLM,
    progress: bool = True,
    on_run: Callable[[str, QAOutcome], None] | None = None,
) -> SweepOutcome:
    """Run every setting of ``grid`` (see the module docstring); return the runs and the comparison."""
    out_dir = Path(out_dir)
    runs = plan(base, grid)
    names = [run_name(o) for o in runs]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sweep.json").write_text(
        json.dumps({"format": SWEEP_FORMAT, "dataset": base.dataset, "runs": names}, indent=2) + "\n",
        encoding="utf-8",
    )
    done: list[tuple[str, QAOutcome]] = []
    for name, options in zip(names, runs, strict=True):
        outcome = run_qa(options, out_dir / name, llm=llm, judge_llm=judge_llm, progress=progress)
        done.append((name, outcome))
        if on_run is not None:
            on_run(name, outcome)
    return SweepOutcome(out_dir, done, write_sweep_report(out_dir))


def _load(path: Path) -> dict[str, object]:
    if not path.is_file():
        raise ValidationError("results.json not found (run not finished?)", where=str(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValidationError("not a QA results file", where=str(path))
    return data


def _get(obj: object, *keys: str) -> object:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _fmt(value: object, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def format_sweep(rows: list[tuple[str, dict[str, object]]]) -> str:
    """The comparison table: one row per run, overall mean [CI] of each metric, failures, tokens, cost."""
    family = FAMILIES.get(str(_get(rows[0][1], "config", "family"))) if rows else LOCOMO
    metrics = family.qa_metrics if family is not None else ("j",)
    extra = ["task-avg J"] if family is not None and family.task_averaged else []
    head = ["run", "context", "k", "mode", "answer prompt", "n", "failed", *metrics, *extra]
    head += ["ctx tokens", "tokens", "cost"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 5 + ["---:"] * (len(head) - 5)) + "|"]
    for name, res in rows:
        config = res.get("config")
        cells = [
            name,
            str(_get(config, "context")),
            str(_get(config, "k") or "–"),
            str(_get(config, "mode") or "–"),
            f"`{_get(config, 'answer_prompt', 'prompt_id')}`",
            str(res.get("questions")),
            str(_get(res, "failed", "samples")),
        ]
        for m in metrics:
            mean, low, high = (_get(res, "aggregates", "overall", m, f) for f in ("mean", "ci_low", "ci_high"))
            cells.append(f"{_fmt(mean)} [{_fmt(low)}, {_fmt(high)}]" if mean is not None else "–")
        if extra:
            cells.append(_fmt(_get(res, "aggregates", "task_averaged", "j", "mean")))
        stages = _get(res, "aggregates", "stages")
        tokens = sum(
            int(str(s.get("tokens_in", 0))) + int(str(s.get("tokens_out", 0)))
            for s in (stages if isinstance(stages, list) else [])
            if isinstance(s, dict)
        )
        cells += [_fmt(_get(res, "context", "mean_tokens"), 0), str(tokens), _fmt(_get(res, "aggregates", "cost"), 4)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_sweep_report(out_dir: Path) -> str:
    """Write ``sweep.md`` (and return it) from ``sweep.json`` and each run's ``results.json``."""
    out_dir = Path(out_dir)
    plan_path = out_dir / "sweep.json"
    if not plan_path.is_file():
        raise ValidationError("sweep.json not found: not a sweep folder", where=str(out_dir))
    sweep = json.loads(plan_path.read_text(encoding="utf-8"))
    names = [str(n) for n in sweep.get("runs", [])] if isinstance(sweep, dict) else []
    rows = [(name, _load(out_dir / name / "results.json")) for name in names]
    judge = _get(rows[0][1], "judge") if rows else None
    text = "\n".join(
        [
            f"# QA sweep: {sweep.get('dataset')}",
            "",
            f"Judge `{_get(judge, 'name')}`, model {_get(judge, 'model')}. Overall means with bootstrap 95% CIs; "
            "'failed' counts questions with any failed stage (not scored, never zero).",
            "",
            format_sweep(rows),
        ]
    )
    (out_dir / "sweep.md").write_text(text + "\n", encoding="utf-8")
    return text
