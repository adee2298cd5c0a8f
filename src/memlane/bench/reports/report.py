"""Reports of a retrieval run, computed from its log alone.

``write_reports(run_dir)`` reads ``log.jsonl`` and writes ``report.md`` (a Markdown table per mode with a
row per category, and the modes side by side), ``results.json``, ``results.csv`` (one row per mode,
group and metric), ``recall.png`` (recall against k per mode) and the rankings: ``rankings.<mode>.jsonl``
for every mode and ``rankings.jsonl`` for the headline mode (hybrid if it was run, else the first mode).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from memlane.bench.datasets.locomo import CATEGORY_NAMES, MEM0_CATEGORY_NAMES
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.retrieval.history import LOCOMO
from memlane.bench.retrieval.metrics import OVERALL, TASK_AVERAGE, GroupSummary, aggregate
from memlane.bench.retrieval.paired import PairedDiff, format_diff, paired_diff
from memlane.bench.retrieval.rankings import LocomoRanking, LongMemEvalRanking, Ranking, write_rankings
from memlane.bench.retrieval.runlog import (
    CALIBRATE_EVERY,
    CALIBRATION_TEXTS,
    LOG_NAME,
    LogContents,
    QuestionRecord,
    read_log,
)
from memlane.bench.split import SPLITS

KEY_METRICS: tuple[tuple[str, str], ...] = (
    ("session/recall_all@5", "session R_all@5"),
    ("session/recall_all@10", "session R_all@10"),
    ("session/recall_any@5", "session R_any@5"),
    ("turn/recall_all@10", "turn R_all@10"),
    ("turn/recall_all@50", "turn R_all@50"),
)
LONGMEMEVAL_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
# LoCoMo papers mostly report categories 1-4 (adversarial questions have no answer to find).
OVERALL_1_4 = "overall (1-4)"
HEADLINE_MODE = "hybrid"
# The figures memlane's retrieval targets are read on (docs/design/003-retrieval.md): each mode's paired
# difference from the headline mode.
PAIRED_METRICS: tuple[tuple[str, str], ...] = (
    ("session/recall_all@5", "session R_all@5"),
    ("session/recall_all@10", "session R_all@10"),
    ("turn/recall_all@10", "turn R_all@10"),
)
SPLIT_NOTE = (
    "Parameters are chosen on `dev` only; targets are read on `test` (the split rule is in "
    "`memlane.bench.split`: LongMemEval by a hash of `question_id`, LoCoMo by conversation)."
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
    family: str
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


def _group_order(family: str, seen: Sequence[str]) -> list[str]:
    known = [CATEGORY_NAMES[n] for n in sorted(CATEGORY_NAMES)] if family == LOCOMO else list(LONGMEMEVAL_TYPES)
    ordered = [c for c in known if c in seen] + [c for c in seen if c not in known]
    tail = [OVERALL, OVERALL_1_4] if family == LOCOMO else [OVERALL, TASK_AVERAGE]
    return ordered + tail


def _mode_result(mode: str, records: list[QuestionRecord], family: str) -> ModeResult:
    pairs = [(r.sample.category, r.scores) for r in records]
    groups = aggregate(pairs)
    if family == LOCOMO:
        main = aggregate((c, s) for c, s in pairs if c != CATEGORY_NAMES[5])
        groups[OVERALL_1_4] = main[OVERALL]
        groups.pop(TASK_AVERAGE, None)
    order = _group_order(family, [c for c in groups if c not in (OVERALL, TASK_AVERAGE, OVERALL_1_4)])
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
    if group == TASK_AVERAGE:
        return None
    out: dict[str, float] = {}
    for r in results.contents.records:
        if r.mode != mode or r.scores is None or metric not in r.scores or (split and r.split != split):
            continue
        category = r.sample.category
        if group == OVERALL_1_4 and category == CATEGORY_NAMES[5]:
            continue
        if group not in (OVERALL, OVERALL_1_4) and category != group:
            continue
        out[r.sample.sample_id] = r.scores[metric]
    return out


def paired_against_headline(results: RunResults, split: str | None = None) -> dict[str, dict[str, PairedDiff]]:
    """Each other mode against the headline mode on the headline group's questions (``split``: one side),
    per :data:`PAIRED_METRICS` that both carry."""
    base = headline_mode(results)
    group = headline_group(results.family)
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


def format_paired(results: RunResults, split: str | None = None) -> list[str]:
    """Markdown lines: each mode's paired difference from the headline mode (empty with one mode)."""
    paired = paired_against_headline(results, split)
    if not paired:
        return []
    base = headline_mode(results)
    labels = " | ".join(label for _, label in PAIRED_METRICS)
    lines = [
        f"Each mode against `{base}` on the same questions ({headline_group(results.family)}): mean of mode - "
        f"{base} with its 95% bootstrap interval, questions where the mode is better / worse, and the two-sided "
        "sign test's p over the questions where they differ.",
        "",
        f"| mode - {base} | {labels} |",
        "|---|" + "---|" * len(PAIRED_METRICS),
    ]
    for mode, row in paired.items():
        lines.append(f"| {mode} | " + " | ".join(format_diff(row.get(m)) for m, _ in PAIRED_METRICS) + " |")
    return [*lines, ""]


def group_label(results: RunResults, group: str) -> str:
    """LoCoMo categories carry their official number and the label mem0-lineage tables give them."""
    if results.family == LOCOMO:
        for number, name in CATEGORY_NAMES.items():
            if name == group:
                return f"{number} {name} [mem0: {MEM0_CATEGORY_NAMES[number]}]"
    return group


def headline_group(family: str) -> str:
    """The overall row tables lead with: LoCoMo categories 1-4 (what papers report), else all questions."""
    return OVERALL_1_4 if family == LOCOMO else OVERALL


def _cell(summary: GroupSummary | None, metric: str) -> str:
    if summary is None or metric not in summary.means:
        return "-"
    return f"{summary.means[metric]:.3f}"


def format_mode_table(results: RunResults, mode: str, result: ModeResult | None = None) -> str:
    """Markdown table of one mode: a row per category and the overall rows, the key figures as columns
    (``result``: one split's figures of the mode instead of the whole run's)."""
    result = results.modes[mode] if result is None else result
    lines = [
        "| group | n | skipped | " + " | ".join(label for _, label in KEY_METRICS) + " |",
        "|---|---:|---:|" + "---:|" * len(KEY_METRICS),
    ]
    for group, summary in result.groups.items():
        cells = " | ".join(_cell(summary, m) for m, _ in KEY_METRICS)
        lines.append(f"| {group_label(results, group)} | {summary.n} | {summary.skipped} | {cells} |")
    return "\n".join(lines)


def format_modes_table(results: RunResults, modes: dict[str, ModeResult] | None = None) -> str:
    """Markdown table: the headline group's key figures of every mode side by side, with search latency
    (``modes``: one split's results instead of the whole run's)."""
    group = headline_group(results.family)
    labels = " | ".join(label for _, label in KEY_METRICS)
    lines = [
        f"| mode ({group}) | n | errors | {labels} | search p50 ms | p95 ms |",
        "|---|---:|---:|" + "---:|" * (len(KEY_METRICS) + 2),
    ]
    for mode, result in (results.modes if modes is None else modes).items():
        overall = result.groups.get(group)
        cells = " | ".join(_cell(overall, m) for m, _ in KEY_METRICS)
        n = overall.n if overall else 0
        lines.append(
            f"| {mode} | {n} | {result.errors} | {cells} | {result.search_ms_p50:.1f} | {result.search_ms_p95:.1f} |"
        )
    return "\n".join(lines)


_PUBLISHED = {
    "matches": "the published file",
    "differs": "NOT the published file: figures are not comparable with published ones",
    "unlisted": "no published digest to check it against",
}


def _describe(results: RunResults) -> list[str]:
    header = results.contents.header
    c = header.config
    ds = header.dataset
    revisions = sorted({str(s.get("git_revision")) for s in results.contents.segments} | {header.git_revision})
    return [
        f"- data set: `{c.dataset}` (file `{ds.get('file')}`, sha256 `{ds.get('sha256')}`"
        + (f", {_PUBLISHED[str(ds['published'])]}" if ds.get("published") in _PUBLISHED else "")
        + (f", params {c.dataset_params}" if c.dataset_params else "")
        + ")",
        f"- ingest: perspective `{c.perspective}`, embedder `{c.embedder}` (`{c.embedder_model_id}`), "
        f"extraction `{c.extraction}`; bench store `{header.store.get('key')}` "
        f"({header.store.get('namespaces')} namespaces, {header.store.get('blocks')} blocks)",
        f"- search: modes {', '.join(c.modes)}; {c.depth} blocks per question; k = {', '.join(map(str, c.ks))}; "
        f"before question date: {c.before_question_date}; limit: {c.limit}",
        f"- code: git {', '.join(revisions)}; memlane {header.packages.get('memlane')}, "
        f"onnxruntime {header.packages.get('onnxruntime')}, numpy {header.packages.get('numpy')}, "
        f"Python {header.packages.get('python')}",
        f"- log: `{LOG_NAME}` (gzipped once the run finished), started {header.created_at}, "
        f"{len(results.contents.segments)} segment(s), {len(results.contents.records)} records",
    ]


def format_calibration(contents: LogContents) -> list[str]:
    """The machine's reference timings through the run, beside each memlane mode's search p50 over the
    records up to the next one (nothing for logs without calibrations)."""
    cals = sorted(contents.calibrations, key=lambda c: c.records)
    if not cals:
        return []
    config = contents.header.config
    modes = [m for m in config.modes if "retriever" not in config.search_settings.get(m, {})]  # not baselines
    lines = [
        "## Machine calibration",
        "",
        f"The p50 of embedding {len(CALIBRATION_TEXTS)} fixed questions one at a time, taken before the first "
        f"question and every {CALIBRATE_EVERY} questions, beside the search p50 of the records that followed. "
        "Search times move with the machine; compare them across runs only where these reference times agree.",
        "",
        "| records | reference embed p50 ms | " + " | ".join(f"{m} search p50 ms" for m in modes) + " |",
        "|---|---:|" + "---:|" * len(modes),
    ]
    for i, cal in enumerate(cals):
        end = cals[i + 1].records if i + 1 < len(cals) else len(contents.records)
        window = contents.records[cal.records : end]
        cells = []
        for m in modes:
            times = [r.latency_ms["search"] for r in window if r.mode == m and "search" in r.latency_ms]
            cells.append(f"{statistics.median(times):.1f}" if times else "-")
        span = f"{cal.records + 1}-{end}" if end > cal.records else f"after {cal.records}"
        lines.append(f"| {span} | {cal.embed_ms_p50:.2f} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def format_report(results: RunResults) -> str:
    """The whole ``report.md``."""
    out = [f"# Retrieval: {results.dataset}", "", *_describe(results), "", "## Modes", ""]
    out += [format_modes_table(results), ""]
    out += format_paired(results)
    for mode, result in results.modes.items():
        out += [f"## {mode}", "", format_mode_table(results, mode), ""]
        out.append(
            f"{result.questions} questions, {result.errors} errors; mean {result.mean_retrieved_turns:.1f} "
            f"turns retrieved per question; {result.padded_turn_lists} turn rankings padded to the contract length."
        )
        out.append("")
    out += format_calibration(results.contents)
    for split, modes in results.splits.items():
        out += [f"## Split: {split}", "", SPLIT_NOTE, "", format_modes_table(results, modes), ""]
        out += format_paired(results, split)
        for mode, result in modes.items():
            out += [f"### {split}: {mode}", "", format_mode_table(results, mode, result), ""]
    out += [
        "Definitions: `session R_all@k` = every evidence session is among the top k sessions; `R_any@k` = at "
        "least one is; `turn R_all@k` = every evidence turn (LongMemEval: user turns with `has_answer`; LoCoMo: "
        "evidence dia_ids) is among the top k turns. n = questions scored; skipped = questions the official "
        "scripts do not score (LongMemEval: `_abs` questions and those without a user turn marked `has_answer`, "
        "which is most single-session-assistant ones; LoCoMo: no evidence). Every k is read from one ranking "
        "per question. "
        "`results.json` and `results.csv` hold every metric (with NDCG and the turn-to-session figures).",
        "",
    ]
    return "\n".join(out)


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
        "modes": {
            mode: {
                "questions": r.questions,
                "errors": r.errors,
                "search_ms_p50": round(r.search_ms_p50, 3),
                "search_ms_p95": round(r.search_ms_p95, 3),
                "mean_retrieved_turns": round(r.mean_retrieved_turns, 3),
                "padded_turn_lists": r.padded_turn_lists,
                "groups": {
                    g: {"n": s.n, "skipped": s.skipped, "means": {k: round(v, 6) for k, v in s.means.items()}}
                    for g, s in r.groups.items()
                },
            }
            for mode, r in results.modes.items()
        },
        "splits": {
            split: {
                mode: {
                    "questions": r.questions,
                    "errors": r.errors,
                    "search_ms_p50": round(r.search_ms_p50, 3),
                    "groups": {
                        g: {"n": s.n, "skipped": s.skipped, "means": {k: round(v, 6) for k, v in s.means.items()}}
                        for g, s in r.groups.items()
                    },
                }
                for mode, r in modes.items()
            }
            for split, modes in results.splits.items()
        },
        "paired": {
            "against": headline_mode(results) if results.modes else None,
            "group": headline_group(results.family),
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


def _ranking(record: QuestionRecord, family: str) -> Ranking:
    if family == LOCOMO:
        return LocomoRanking(record.sample.sample_id, record.ranked_turn_ids, record.ranked_session_ids)
    return LongMemEvalRanking(record.sample.sample_id, record.ranked_session_ids, record.ranked_turn_ids)


def write_rankings_files(results: RunResults, run_dir: Path) -> list[Path]:
    """``rankings.<mode>.jsonl`` per mode and ``rankings.jsonl`` (hybrid, else the first mode)."""
    paths = []
    modes = list(results.modes)
    for mode in modes:
        records = [r for r in results.contents.records if r.mode == mode]
        path = run_dir / f"rankings.{mode}.jsonl"
        write_rankings(path, (_ranking(r, results.family) for r in records))
        paths.append(path)
    if modes:
        headline = HEADLINE_MODE if HEADLINE_MODE in modes else modes[0]
        records = [r for r in results.contents.records if r.mode == headline]
        path = run_dir / "rankings.jsonl"
        write_rankings(path, (_ranking(r, results.family) for r in records))
        paths.append(path)
    return paths


@dataclass(frozen=True)
class ReportFiles:
    """The files :func:`write_reports` wrote, and the results they show."""

    results: RunResults
    report: Path
    json: Path
    csv: Path
    plot: Path
    rankings: list[Path]


def write_reports(run_dir: Path) -> ReportFiles:
    """(Re)generate every report file of ``run_dir`` from its ``log.jsonl``."""
    from memlane.bench.reports.plot import write_recall_plot

    run_dir = Path(run_dir)
    results = compute_results(read_log(run_dir / LOG_NAME))
    report = run_dir / "report.md"
    report.write_text(format_report(results), encoding="utf-8")
    json_path = run_dir / "results.json"
    json_path.write_text(json.dumps(results_to_json(results), indent=2) + "\n", encoding="utf-8")
    csv_path = run_dir / "results.csv"
    write_csv(results, csv_path)
    plot = run_dir / "recall.png"
    write_recall_plot(results, plot)
    return ReportFiles(results, report, json_path, csv_path, plot, write_rankings_files(results, run_dir))


def load_results(run_dir: Path) -> RunResults:
    """Results of the run in ``run_dir`` (from its log)."""
    return compute_results(read_log(Path(run_dir) / LOG_NAME))


def format_compare(a: RunResults, b: RunResults, *, categories: bool = False) -> str:
    """Two runs side by side: per mode (present in either) and group, each key figure in A, in B, B - A."""
    groups = [headline_group(a.family)]
    if categories:
        for run in (a, b):
            for result in run.modes.values():
                groups += [g for g in result.groups if g not in groups]
    lines = [
        f"A: {a.dataset}, {a.contents.header.config.embedder}/{a.contents.header.config.perspective}, "
        f"git {a.contents.header.git_revision[:12]}, {a.contents.header.created_at}",
        f"B: {b.dataset}, {b.contents.header.config.embedder}/{b.contents.header.config.perspective}, "
        f"git {b.contents.header.git_revision[:12]}, {b.contents.header.created_at}",
        "",
        "| mode | group | metric | A | B | B - A | paired B - A [95%], +better / -worse, sign test |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    modes = list(dict.fromkeys([*a.modes, *b.modes]))
    for mode in modes:
        for group in groups:
            sa = a.modes[mode].groups.get(group) if mode in a.modes else None
            sb = b.modes[mode].groups.get(group) if mode in b.modes else None
            if sa is None and sb is None:
                continue
            for metric, label in KEY_METRICS:
                va = sa.means.get(metric) if sa else None
                vb = sb.means.get(metric) if sb else None
                delta = f"{vb - va:+.3f}" if va is not None and vb is not None else "-"
                qa = per_question(a, mode, group, metric) if mode in a.modes else None
                qb = per_question(b, mode, group, metric) if mode in b.modes else None
                paired = format_diff(paired_diff(qa, qb)) if qa is not None and qb is not None else "-"
                lines.append(
                    f"| {mode} | {group} | {label} | {_cell(sa, metric)} | {_cell(sb, metric)} | {delta} | {paired} |"
                )
    lines += [
        "",
        "Paired: over the questions both runs scored (matched by question id): the mean of B - A with its 95% "
        "bootstrap interval, how many questions B gets higher / lower, and the two-sided sign test's p.",
    ]
    return "\n".join(lines)
