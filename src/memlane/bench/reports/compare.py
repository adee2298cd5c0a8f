"""Two retrieval runs side by side (``memlane bench compare``): each key figure in A and in B, and B - A
paired question by question."""

from __future__ import annotations

from memlane.bench.reports.report import KEY_METRICS, format_cell
from memlane.bench.reports.results import RunResults, per_question
from memlane.bench.retrieval.paired import format_diff, paired_diff


def format_compare(a: RunResults, b: RunResults, *, categories: bool = False) -> str:
    """Two runs side by side: per mode (present in either) and group, each key figure in A, in B, B - A."""
    groups = [a.family.headline_row]
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
                cells = f"{format_cell(sa, metric)} | {format_cell(sb, metric)} | {delta} | {paired}"
                lines.append(f"| {mode} | {group} | {label} | {cells} |")
    lines += [
        "",
        "Paired: over the questions both runs scored (matched by question id): the mean of B - A with its 95% "
        "bootstrap interval, how many questions B gets higher / lower, and the two-sided sign test's p.",
    ]
    return "\n".join(lines)
