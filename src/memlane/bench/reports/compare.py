"""Two retrieval runs side by side (``memlane bench compare``): each key figure in A and in B over the
questions both scored, and B - A paired question by question."""

from __future__ import annotations

from memlane.bench.reports.report import KEY_METRICS
from memlane.bench.reports.results import RunResults, per_question
from memlane.bench.retrieval.metrics import GroupSummary
from memlane.bench.retrieval.paired import format_diff, paired_diff


def format_compare(a: RunResults, b: RunResults, *, categories: bool = False, all_questions: bool = False) -> str:
    """Two runs side by side: per mode (present in either) and group, each key figure in A, in B, and B - A,
    with how many questions each side scored. By default A and B are means over the questions both runs
    scored (matched by question id), so that a full run and a ``--limit`` run are not compared as if they
    asked the same questions; ``all_questions`` shows each run's own means instead (B - A is then unpaired,
    and the table says so)."""
    groups = [a.family.headline_row]
    if categories:
        for run in (a, b):
            for result in run.modes.values():
                groups += [g for g in result.groups if g not in groups]
    basis = (
        "each run's own questions (B - A unpaired where n A != n B)"
        if all_questions
        else "the questions both runs scored (n shared)"
    )
    lines = [
        f"A: {a.dataset}, {a.contents.header.config.embedder}/{a.contents.header.config.perspective}, "
        f"git {a.contents.header.git_revision[:12]}, {a.contents.header.created_at}",
        f"B: {b.dataset}, {b.contents.header.config.embedder}/{b.contents.header.config.perspective}, "
        f"git {b.contents.header.git_revision[:12]}, {b.contents.header.created_at}",
        f"A and B are means over {basis}.",
        "",
        "| mode | group | metric | n A | n B | n shared | A | B | B - A "
        "| paired B - A [95%], +better / -worse, sign test |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    modes = list(dict.fromkeys([*a.modes, *b.modes]))
    for mode in modes:
        for group in groups:
            sa = a.modes[mode].groups.get(group) if mode in a.modes else None
            sb = b.modes[mode].groups.get(group) if mode in b.modes else None
            if sa is None and sb is None:
                continue
            for metric, label in KEY_METRICS:
                qa = per_question(a, mode, group, metric) if mode in a.modes else None
                qb = per_question(b, mode, group, metric) if mode in b.modes else None
                lines.append(f"| {mode} | {group} | {label} | " + _compare_cells(sa, sb, qa, qb, metric, all_questions))
    lines += [
        "",
        "Paired: over the questions both runs scored (matched by question id): the mean of B - A with its 95% "
        "bootstrap interval, how many questions B gets higher / lower, and the two-sided sign test's p.",
    ]
    return "\n".join(lines)


def _compare_cells(
    sa: GroupSummary | None,
    sb: GroupSummary | None,
    qa: dict[str, float] | None,
    qb: dict[str, float] | None,
    metric: str,
    all_questions: bool,
) -> str:
    """The cells after the metric's label: n A, n B, n shared, A, B, B - A, paired."""
    na, nb = (len(q) if q is not None else None for q in (qa, qb))
    shared = sorted(qa.keys() & qb.keys()) if qa is not None and qb is not None else []
    if all_questions or qa is None or qb is None:  # the task average has no per-question figures
        va = sa.means.get(metric) if sa else None
        vb = sb.means.get(metric) if sb else None
    else:
        va = sum(qa[q] for q in shared) / len(shared) if shared else None
        vb = sum(qb[q] for q in shared) / len(shared) if shared else None
    delta = f"{vb - va:+.3f}" if va is not None and vb is not None else "-"
    paired = format_diff(paired_diff(qa, qb)) if qa is not None and qb is not None else "-"

    def show(v: float | int | None, fmt: str = "") -> str:
        return "-" if v is None else format(v, fmt)

    ns = f"{show(na)} | {show(nb)} | {len(shared) if qa is not None and qb is not None else '-'}"
    return f"{ns} | {show(va, '.3f')} | {show(vb, '.3f')} | {delta} | {paired} |"
