"""The figures of a retrieval run, computed from its log alone: per mode (and per dev/test split) the means
of every metric per category and overall, search latency, padding, and each mode paired with the headline
mode; ``results.json`` and ``results.csv`` hold them.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.retrieval.metrics import OVERALL, TASK_AVERAGE, GroupSummary, aggregate
from memlane.bench.retrieval.paired import PairedDiff, paired_diff
from memlane.bench.retrieval.runlog import LOG_NAME, LogContents, QuestionRecord, read_log
from memlane.bench.split import SPLITS

HEADLINE_MODE = "hybrid"
# The figures memlane's retrieval targets are read on (docs/design/003-retrieval.md): each mode's paired
# difference from the headline mode.
PAIRED_METRICS: tuple[tuple[str, str], ...] = (
    ("session/recall_all@5", "session R_all@5"),
    ("session/recall_all@10", "session R_all@10"),
    ("turn/recall_all@10", "turn R_all@10"),
)


@dataclass(frozen=True)
class ModeResult:
    """Aggregates of one mode: per-group means (see ``aggregate``), errors, search latency, padding."""

    mode: str
    groups: dict[str, GroupSummary]
    questions: int
    errors: int
    search_ms_p50: float
    search_ms_p95: float
    mean_retrieved_turns: float
    padded_turn_lists: int


@dataclass(frozen=True)
class RunResults:
    """Everything a report shows, computed from one log."""

    contents: LogContents
    family: Family
    modes: dict[str, ModeResult]
    splits: dict[str, dict[str, ModeResult]] = field(default_factory=dict)

    @property
    def dataset(self) -> str:
        return self.contents.header.config.dataset


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _mode_result(mode: str, records: list[QuestionRecord], family: Family) -> ModeResult:
    pairs = [(r.sample.category, r.scores) for r in records]
    groups = aggregate(pairs)
    headline = family.headline_row
    if headline != OVERALL:  # a mean over some of the categories (LoCoMo's "overall (1-4)")
        keep = family.row_filter(headline)
        assert keep is not None
        groups[headline] = aggregate((c, s) for c, s in pairs if keep(c))[OVERALL]
    seen = [c for c in groups if c not in (OVERALL, TASK_AVERAGE, *family.summary_rows)]
    known = family.categories
    order = [c for c in known if c in seen] + [c for c in seen if c not in known] + list(family.summary_rows)
    search_ms = [r.latency_ms.get("search", 0.0) for r in records]
    return ModeResult(
        mode=mode,
        groups={g: groups[g] for g in order if g in groups},
        questions=len(records),
        errors=sum(r.error is not None for r in records),
        search_ms_p50=_percentile(search_ms, 0.5),
        search_ms_p95=_percentile(search_ms, 0.95),
        mean_retrieved_turns=sum(r.retrieved_turns for r in records) / len(records) if records else 0.0,
        padded_turn_lists=sum(r.retrieved_turns < len(r.ranked_turn_ids) for r in records),
    )


def compute_results(contents: LogContents) -> RunResults:
    """Per-mode aggregates of a parsed log."""
    family = DATASETS[contents.header.config.dataset].family
    by_mode: dict[str, list[QuestionRecord]] = {m: [] for m in contents.header.config.modes}
    for r in contents.records:
        by_mode.setdefault(r.mode, []).append(r)
    splits: dict[str, dict[str, ModeResult]] = {}
    for split in SPLITS:
        part = {m: [r for r in rs if r.split == split] for m, rs in by_mode.items()}
        if any(part.values()):
            splits[split] = {m: _mode_result(m, rs, family) for m, rs in part.items() if rs}
    return RunResults(contents, family, {m: _mode_result(m, rs, family) for m, rs in by_mode.items()}, splits)


def headline_mode(results: RunResults) -> str:
    """The mode reports lead with and compare the others to: hybrid if it was run, else the first."""
    modes = list(results.modes)
    return HEADLINE_MODE if HEADLINE_MODE in modes else modes[0]


def per_question(
    results: RunResults, mode: str, group: str, metric: str, split: str | None = None
) -> dict[str, float] | None:
    """``metric`` of every question of ``group`` that ``mode`` scored, by sample id (``split``: only that
    side's questions); None for the task average, which is not a mean over questions."""
    members = results.family.row_filter(group)
    if members is None:
        return None
    out: dict[str, float] = {}
    for r in results.contents.records:
        if r.mode != mode or r.scores is None or metric not in r.scores or (split and r.split != split):
            continue
        if not members(r.sample.category):
            continue
        out[r.sample.sample_id] = r.scores[metric]
    return out


def paired_against_headline(results: RunResults, split: str | None = None) -> dict[str, dict[str, PairedDiff]]:
    """Each other mode against the headline mode on the headline group's questions (``split``: one side),
    per :data:`PAIRED_METRICS` that both carry."""
    base = headline_mode(results)
    group = results.family.headline_row
    modes = results.modes if split is None else results.splits.get(split, {})
    reference = {metric: per_question(results, base, group, metric, split) for metric, _ in PAIRED_METRICS}
    out: dict[str, dict[str, PairedDiff]] = {}
    for mode in modes:
        if mode == base:
            continue
        row: dict[str, PairedDiff] = {}
        for metric, _ in PAIRED_METRICS:
            a = reference[metric]
            b = per_question(results, mode, group, metric, split)
            diff = paired_diff(a, b) if a is not None and b is not None else None
            if diff is not None:
                row[metric] = diff
        out[mode] = row
    return out


def _mode_json(r: ModeResult, *, whole_run: bool) -> dict[str, object]:
    # A split's entry leaves out what only the whole run's reports show.
    out: dict[str, object] = {"questions": r.questions, "errors": r.errors, "search_ms_p50": round(r.search_ms_p50, 3)}
    if whole_run:
        out |= {
            "search_ms_p95": round(r.search_ms_p95, 3),
            "mean_retrieved_turns": round(r.mean_retrieved_turns, 3),
            "padded_turn_lists": r.padded_turn_lists,
        }
    out["groups"] = {
        g: {"n": s.n, "skipped": s.skipped, "means": {k: round(v, 6) for k, v in s.means.items()}}
        for g, s in r.groups.items()
    }
    return out


def results_to_json(results: RunResults) -> dict[str, object]:
    """``results.json``: the header and, per mode, every group's means and counts."""
    header = results.contents.header
    return {
        "dataset": header.dataset,
        "config": asdict(header.config),
        "store": header.store,
        "git_revision": header.git_revision,
        "segments": results.contents.segments,
        "calibrations": [c.to_json() for c in results.contents.calibrations],
        "modes": {mode: _mode_json(r, whole_run=True) for mode, r in results.modes.items()},
        "splits": {
            split: {mode: _mode_json(r, whole_run=False) for mode, r in modes.items()}
            for split, modes in results.splits.items()
        },
        "paired": {
            "against": headline_mode(results) if results.modes else None,
            "group": results.family.headline_row,
            "splits": {
                split: {
                    mode: {metric: asdict(d) for metric, d in row.items()}
                    for mode, row in paired_against_headline(results, split).items()
                }
                for split in results.splits
            },
        },
    }


def write_csv(results: RunResults, path: Path) -> None:
    """``results.csv``: mode, group, metric, value, n (questions carrying that metric)."""
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["dataset", "mode", "group", "metric", "value", "n"])
        for mode, r in results.modes.items():
            for group, s in r.groups.items():
                for metric, value in s.means.items():
                    writer.writerow([results.dataset, mode, group, metric, f"{value:.6f}", s.counts[metric]])


def load_results(run_dir: Path) -> RunResults:
    """Results of the run in ``run_dir`` (from its log)."""
    return compute_results(read_log(Path(run_dir) / LOG_NAME))
