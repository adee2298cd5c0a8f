"""``report.md`` and the exported rankings of a retrieval run, computed from its log alone.

``write_reports(run_dir)`` reads ``log.jsonl`` and writes ``report.md`` (a Markdown table per mode with a
row per category, and the modes side by side), ``results.json``, ``results.csv`` (one row per mode,
group and metric), ``recall.png`` (recall against k per mode) and the rankings: ``rankings.<mode>.jsonl``
for every mode and ``rankings.jsonl`` for the headline mode (hybrid if it was run, else the first mode).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from memlane.bench.reports.plot import write_recall_plot
from memlane.bench.reports.results import (
    PAIRED_METRICS,
    ModeResult,
    RunResults,
    compute_results,
    headline_mode,
    paired_against_headline,
    results_to_json,
    write_csv,
)
from memlane.bench.retrieval.metrics import HARMFUL, HELPFUL, MOVES, TASK_AVERAGE, GroupSummary
from memlane.bench.retrieval.paired import format_diff
from memlane.bench.retrieval.rankings import write_rankings
from memlane.bench.retrieval.runlog import (
    CALIBRATE_EVERY,
    CALIBRATION_TEXTS,
    LOG_NAME,
    LogContents,
    read_log,
)

KEY_METRICS: tuple[tuple[str, str], ...] = (
    ("session/recall_all@5", "session R_all@5"),
    ("session/recall_all@10", "session R_all@10"),
    ("session/recall_any@5", "session R_any@5"),
    ("turn/recall_all@10", "turn R_all@10"),
    ("turn/recall_any@10", "turn R_any@10"),
    ("turn/recall_all@50", "turn R_all@50"),
)

_TOP = (
    ("recall_any@1", "R_any@1"),
    ("recall_any@3", "R_any@3"),
    ("recall_all@5", "R_all@5"),
    ("recall_all@10", "R_all@10"),
    ("ndcg_any@10", "NDCG@10"),
    ("mrr", "MRR"),
)
# The whole curve from the first hit on, for agents that read only the top few hits.
TOP_METRICS: tuple[tuple[str, str], ...] = tuple(
    (f"{level}/{m}", f"{level} {label}") for level in ("session", "turn") for m, label in _TOP
)
TOP_NOTE = (
    "What an agent reading only the first hits sees: `R_any@1` = the first session (turn) is evidence, `R_any@3` "
    "= one of the first three is, `NDCG@10` = LongMemEval's official binary NDCG, `MRR` = 1 / the rank of the "
    "first evidence item (0 when the ranking holds none)."
)
AUDIT_NOTE = (
    "What supersession moved, summed over the scored questions: `moved` = sessions (turns) that rank higher "
    "than their score alone puts them (supersession reorders without rescoring); `harmful` = a moved "
    "non-evidence item now above evidence it ranked below; `helpful` = a moved evidence item now above "
    "non-evidence it ranked below; a move that passes only evidence or only non-evidence is neither."
)

RECENCY_METRICS: tuple[tuple[str, str], ...] = (
    ("session/latest_first", "session latest first"),
    ("session/latest@1", "session latest@1"),
    ("turn/latest_first", "turn latest first"),
    ("turn/latest@1", "turn latest@1"),
)
RECENCY_NOTE = (
    "Questions whose evidence sessions carry two or more dates (a fact told, then told again): `latest first` = "
    "the newest evidence session (turn) ranks above every older evidence session (turn); `latest@1` = the "
    "first session (turn) of the ranking is the newest evidence. n = questions with dated evidence of "
    "several dates at session level (LongMemEval's knowledge-update questions are the main set)."
)

SPLIT_NOTE = (
    "Parameters are chosen on `dev` only; targets are read on `test` (the split rule is in "
    "`memlane.bench.split`: LongMemEval by a hash of `question_id`, LoCoMo by conversation)."
)


def format_paired(results: RunResults, split: str | None = None) -> list[str]:
    """Markdown lines: each mode's paired difference from the headline mode (empty with one mode)."""
    paired = paired_against_headline(results, split)
    if not paired:
        return []
    base = headline_mode(results)
    labels = " | ".join(label for _, label in PAIRED_METRICS)
    lines = [
        f"Each mode against `{base}` on the same questions ({results.family.headline_row}): mean of mode - "
        f"{base} with its 95% bootstrap interval, questions where the mode is better / worse, and the two-sided "
        "sign test's p over the questions where they differ.",
        "",
        f"| mode - {base} | {labels} |",
        "|---|" + "---|" * len(PAIRED_METRICS),
    ]
    for mode, row in paired.items():
        lines.append(f"| {mode} | " + " | ".join(format_diff(row.get(m)) for m, _ in PAIRED_METRICS) + " |")
    return [*lines, ""]


def format_cell(summary: GroupSummary | None, metric: str) -> str:
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
        cells = " | ".join(format_cell(summary, m) for m, _ in KEY_METRICS)
        lines.append(f"| {results.family.category_label(group)} | {summary.n} | {summary.skipped} | {cells} |")
    return "\n".join(lines)


def format_recency_table(results: RunResults, modes: dict[str, ModeResult] | None = None) -> list[str]:
    """Markdown lines: per mode and group (category or summary row) with questions whose evidence spans
    several dates, whether the newest evidence ranks first (empty when no question has such evidence)."""
    first = RECENCY_METRICS[0][0]
    labels = " | ".join(label for _, label in RECENCY_METRICS)
    lines = [f"| mode | group | n | {labels} |", "|---|---|---:|" + "---:|" * len(RECENCY_METRICS)]
    rows = 0
    for mode, result in (results.modes if modes is None else modes).items():
        for group, summary in result.groups.items():
            n = summary.counts.get(first, 0) if group != TASK_AVERAGE else summary.n
            if first not in summary.means:
                continue
            cells = " | ".join(format_cell(summary, m) for m, _ in RECENCY_METRICS)
            lines.append(f"| {mode} | {results.family.category_label(group)} | {n} | {cells} |")
            rows += 1
    return [RECENCY_NOTE, "", *lines, ""] if rows else []


def format_top_table(results: RunResults, modes: dict[str, ModeResult] | None = None) -> list[str]:
    """Markdown lines: per mode and group, the rank-sensitive figures (:data:`TOP_METRICS`)."""
    labels = " | ".join(label for _, label in TOP_METRICS)
    lines = [f"| mode | group | n | {labels} |", "|---|---|---:|" + "---:|" * len(TOP_METRICS)]
    for mode, result in (results.modes if modes is None else modes).items():
        for group, summary in result.groups.items():
            if group == TASK_AVERAGE or not any(m in summary.means for m, _ in TOP_METRICS):
                continue
            cells = " | ".join(format_cell(summary, m) for m, _ in TOP_METRICS)
            lines.append(f"| {mode} | {results.family.category_label(group)} | {summary.n} | {cells} |")
    return [TOP_NOTE, "", *lines, ""]


def format_audit_table(results: RunResults, modes: dict[str, ModeResult] | None = None) -> list[str]:
    """Markdown lines: per mode, group and level, the moves supersession made and how many were harmful or
    helpful (empty when no mode carries the audit)."""
    lines = [
        "| mode | group | level | questions | moved | harmful | helpful | harmful / moved |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    rows = 0
    for mode, result in (results.modes if modes is None else modes).items():
        for group, summary in result.groups.items():
            for level in ("session", "turn"):
                key = f"{level}/{MOVES}"
                if group == TASK_AVERAGE or key not in summary.means:
                    continue
                n = summary.counts[key]
                moved, harmful, helpful = (round(summary.means[f"{level}/{m}"] * n) for m in (MOVES, HARMFUL, HELPFUL))
                share = f"{harmful / moved:.3f}" if moved else "-"
                label = results.family.category_label(group)
                lines.append(f"| {mode} | {label} | {level} | {n} | {moved} | {harmful} | {helpful} | {share} |")
                rows += 1
    return [AUDIT_NOTE, "", *lines, ""] if rows else []


def format_modes_table(results: RunResults, modes: dict[str, ModeResult] | None = None) -> str:
    """Markdown table: the headline group's key figures of every mode side by side, with search latency
    (``modes``: one split's results instead of the whole run's)."""
    group = results.family.headline_row
    labels = " | ".join(label for _, label in KEY_METRICS)
    lines = [
        f"| mode ({group}) | n | errors | {labels} | search p50 ms | p95 ms |",
        "|---|---:|---:|" + "---:|" * (len(KEY_METRICS) + 2),
    ]
    for mode, result in (results.modes if modes is None else modes).items():
        overall = result.groups.get(group)
        cells = " | ".join(format_cell(overall, m) for m, _ in KEY_METRICS)
        n = overall.n if overall else 0
        lines.append(
            f"| {mode} | {n} | {result.errors} | {cells} | {result.search_ms_p50:.1f} | {result.search_ms_p95:.1f} |"
        )
    return "\n".join(lines)


HEADLINE_METRICS = ("session/recall_all@10", "turn/recall_all@10")


def format_headline(results: RunResults, report: Path) -> str:
    """One line of what a run measured: the data set, the headline group and its questions, each mode's
    session and turn recall_all@10 there (the headline mode first), and where the report is."""
    group = results.family.headline_row
    first = headline_mode(results)
    modes = [first, *(m for m in results.modes if m != first)]
    summaries = {m: results.modes[m].groups.get(group) for m in modes}
    n = max((g.n for g in summaries.values() if g is not None), default=0)
    figures = ", ".join(
        f"{m} " + " / ".join(format_cell(g, metric) for metric in HEADLINE_METRICS) for m, g in summaries.items()
    )
    labels = " / ".join(label for key, label in KEY_METRICS if key in HEADLINE_METRICS)
    return (
        f"measured: {results.dataset}, {n} questions ({group}), {len(modes)} modes; {labels}: {figures}; "
        f"report: {report}"
    )


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
        f"before question date: {c.before_question_date}; limit: {c.limit}"
        + (f"; the first {c.per_category} questions of each category" if c.per_category else ""),
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
    out += ["## Top of the ranking", "", *format_top_table(results)]
    recency = format_recency_table(results)
    if recency:
        out += ["## Newest evidence first", "", *recency]
    audit = format_audit_table(results)
    if audit:
        out += ["## Supersession audit", "", *audit]
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
        out += format_top_table(results, modes)
        out += format_recency_table(results, modes)
        out += format_audit_table(results, modes)
        for mode, result in modes.items():
            out += [f"### {split}: {mode}", "", format_mode_table(results, mode, result), ""]
    out += [
        "Definitions: `session R_all@k` = every evidence session is among the top k sessions; `R_any@k` = at "
        "least one is; `turn R_all@k` = every evidence turn (LongMemEval: user turns with `has_answer`; LoCoMo: "
        "evidence dia_ids) is among the top k turns, `turn R_any@k` that at least one is. n = questions scored; "
        "skipped = questions the official "
        "scripts do not score (LongMemEval: `_abs` questions and those without a user turn marked `has_answer`, "
        "which is most single-session-assistant ones; LoCoMo: no evidence). Every k is read from one ranking "
        "per question. "
        "`results.json` and `results.csv` hold every metric (with NDCG and the turn-to-session figures).",
        "",
    ]
    return "\n".join(out)


def write_rankings_files(results: RunResults, run_dir: Path) -> list[Path]:
    """``rankings.<mode>.jsonl`` per mode and ``rankings.jsonl`` (the headline mode: hybrid, else the first)."""
    targets = [(mode, run_dir / f"rankings.{mode}.jsonl") for mode in results.modes]
    if results.modes:
        targets.append((headline_mode(results), run_dir / "rankings.jsonl"))
    ranking = results.family.ranking
    for mode, path in targets:
        records = (r for r in results.contents.records if r.mode == mode)
        write_rankings(path, (ranking(r.sample.sample_id, r.ranked_session_ids, r.ranked_turn_ids) for r in records))
    return [path for _, path in targets]


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
