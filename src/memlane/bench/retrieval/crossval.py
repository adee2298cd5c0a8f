"""Choosing the supersession thresholds by cross-validation, and reading only held-out figures.

The questions of one or more data sets (their candidates collected once, as ``memlane bench tune`` does:
:func:`memlane.bench.retrieval.tune.collect`) are cut into ``folds`` folds by namespace (a LoCoMo
conversation, a LongMemEval question's haystack: questions that share a history never sit on both sides).
For each fold, every grid point is scored on the other folds' questions and the best is applied to the
held-out fold; the figures reported are those of the held-out folds, each question scored by a point chosen
without it. The setting to ship is the point the same objective picks on every question.

The objective adds, over the data sets, the mean of each named metric over the questions that carry it
(``latest_first``-type figures exist only for questions whose evidence spans several dates), each times its
weight: by default the session-level ``latest_first`` and ``latest@1`` once, and the recall figures the
reports lead with (session R_all@5, R_all@10, turn R_all@10) ten times, so that a point which costs recall
elsewhere loses more than it gains in ordering.

Run: ``python -m memlane.bench.retrieval.crossval DATASET [DATASET ...]`` (``--help``).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from memlane.bench.datasets.families import LOCOMO
from memlane.bench.datasets.model import Sample
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.retrieval.history import rank as rank_blocks
from memlane.bench.retrieval.run import RetrievalOptions
from memlane.bench.retrieval.runlog import MIN_RANKING_LENGTH
from memlane.bench.retrieval.tune import DevSet, QuestionCandidates, collect
from memlane.core import retrieval
from memlane.core.retrieval import PRESETS, Scored, SearchSettings, with_candidates
from memlane.core.timefmt import now_utc, to_epoch

RECALL = ("session/recall_all@5", "session/recall_all@10", "turn/recall_all@10")
RECENCY = ("session/latest_first", "session/latest@1")
DEFAULT_WEIGHTS: dict[str, float] = {**dict.fromkeys(RECENCY, 1.0), **dict.fromkeys(RECALL, 10.0)}
DEFAULT_GRID: dict[str, tuple[float, ...]] = {
    "supersede_depth": (5, 10),
    "supersede_similarity": (0.3, 0.45, 0.6, 0.75),
    "supersede_terms": (0.0, 0.25, 0.5, 0.75),
    "supersede_ratio": (0.3, 0.5, 0.7),
    "supersede_sessions": (0, 1),
}
Scores = dict[str, float]


@dataclass
class Question:
    """One question, its ranking before supersession, what supersession reads of its candidates, and its
    scores without supersession (filled on first use: most points leave most rankings as they were)."""

    dataset: str
    sample: Sample
    candidates: QuestionCandidates
    ranked: Scored
    unchanged: Scores | None = None
    scored_unchanged: bool = False


def fold_of(namespace: str, folds: int) -> int:
    """The fold of a namespace: a hash, so the same namespace is in the same fold on every run."""
    return int.from_bytes(hashlib.sha256(namespace.encode("utf-8")).digest()[:8], "big") % folds


def prepare(dev: DevSet, base: SearchSettings, categories: frozenset[str] | None = None) -> list[Question]:
    """Each collected question (of ``categories``, when given) ranked once under ``base`` without
    supersession: the grid varies only the supersession settings, which apply after ranking."""
    out = []
    settings = with_candidates(base, dev.depth)
    for q in dev.questions:
        if categories is not None and q.sample.category not in categories:
            continue
        asked = q.sample.question_date or now_utc()
        out.append(Question(dev.dataset, q.sample, q, retrieval.rank(q.candidates, settings, asked=asked)))
    return out


def question_scores(dev: DevSet, q: Question, settings: SearchSettings) -> Scores | None:
    """The harness's scores of one question with supersession under ``settings`` (as a bench run's search,
    which passes the question date as ``at``)."""
    family = DATASETS[dev.dataset].family
    if family == LOCOMO and q.sample.category_number not in (1, 2, 3, 4):
        return None
    asked = q.sample.question_date or now_utc()
    until = to_epoch(asked) if q.sample.question_date else None
    sessions = {ref: b.session_id for ref, b in q.candidates.blocks.items()}
    ranked, _ = retrieval.supersede(
        q.ranked, q.candidates.versions, q.sample.question, settings, asked=asked, until=until, sessions=sessions
    )
    same = [ref for ref, _, _ in ranked[: dev.depth]] == [ref for ref, _, _ in q.ranked[: dev.depth]]
    if same and q.scored_unchanged:
        return q.unchanged
    blocks = q.candidates.blocks
    rankings = rank_blocks((blocks[ref] for ref, _, _ in ranked[: dev.depth]), q.candidates.index,
                           max(MIN_RANKING_LENGTH, max(dev.ks)))  # fmt: skip
    dates = q.candidates.index.session_dates
    scores = family.score(q.sample, rankings.session_ids, rankings.turn_ids, dev.ks, session_dates=dates)
    if same:
        q.unchanged, q.scored_unchanged = scores, True
    return scores


def grid_points(base: SearchSettings, grid: Mapping[str, Sequence[float]]) -> list[SearchSettings]:
    """Every combination of the grid's values over ``base``."""
    names = list(grid)
    points = []
    for values in itertools.product(*(grid[n] for n in names)):
        point: dict[str, object] = {}
        for n, v in zip(names, values, strict=True):
            point[n] = int(v) if n == "supersede_depth" else bool(v) if n == "supersede_sessions" else float(v)
        points.append(replace(base, **point))  # type: ignore[arg-type]
    return points


def objective(
    rows: Sequence[Mapping[str, float] | None], weights: Mapping[str, float]
) -> float:  # rows: per-question scores of one data set
    """The weighted sum of each metric's mean over the rows that carry it."""
    total = 0.0
    for metric, weight in weights.items():
        values = [r[metric] for r in rows if r is not None and metric in r]
        if values:
            total += weight * sum(values) / len(values)
    return total


def means(rows: Sequence[Mapping[str, float] | None], metrics: Sequence[str]) -> dict[str, tuple[float, int]]:
    """Each metric's mean and count over the rows that carry it (NaN, 0 when none does)."""
    out = {}
    for metric in metrics:
        values = [r[metric] for r in rows if r is not None and metric in r]
        out[metric] = (sum(values) / len(values) if values else math.nan, len(values))
    return out


@dataclass(frozen=True)
class CrossValidation:
    """What :func:`cross_validate` found: the point picked for each fold, the held-out scores (per data
    set, question by question in each fold's picked point), the same questions with supersession off, and
    the point picked on all questions."""

    picked: list[SearchSettings]
    held_out: dict[str, list[Scores | None]]
    off: dict[str, list[Scores | None]]
    categories: dict[str, list[str]]
    chosen: SearchSettings


def point_key(settings: SearchSettings) -> str:
    """A grid point as a stable text (its supersession settings)."""
    return json.dumps({k: v for k, v in settings.to_json().items() if k.startswith("supersede")}, sort_keys=True)


def score_table(
    dev: DevSet,
    questions: Sequence[Question],
    points: Sequence[SearchSettings],
    *,
    known: dict[str, list[Scores | None]] | None = None,
    progress: bool = False,
) -> list[list[Scores | None]]:
    """Every question's scores under every point; ``known`` (by :func:`point_key`) holds rows already
    computed, and gains the new ones."""
    rows: list[list[Scores | None]] = []
    for i, p in enumerate(points):
        key = point_key(p)
        if known is not None and key in known:
            rows.append(known[key])
            continue
        rows.append([question_scores(dev, q, p) for q in questions])
        if known is not None:
            known[key] = rows[-1]
        if progress:
            print(f"{dev.dataset}: grid point {i + 1}/{len(points)}", file=sys.stderr, flush=True)
    return rows


def cross_validate(
    devs: Mapping[str, DevSet],
    questions: Mapping[str, list[Question]],
    points: Sequence[SearchSettings],
    off: SearchSettings,
    *,
    folds: int = 5,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    progress: bool = False,
    tables: Mapping[str, list[list[Scores | None]]] | None = None,
) -> CrossValidation:
    """Score every point on every question once (``tables``: those scores, per data set, already computed
    by :func:`score_table`), then pick per fold on the other folds (see the module doc)."""
    table = dict(tables) if tables is not None else {}
    for name, qs in questions.items():
        if name not in table:
            table[name] = score_table(devs[name], qs, points, progress=progress)
    fold = {name: [fold_of(q.sample.namespace, folds) for q in qs] for name, qs in questions.items()}

    def pick(keep: int | None) -> int:
        best, best_value = 0, -math.inf
        for i in range(len(points)):
            value = 0.0
            for name in questions:
                rows = [r for r, f in zip(table[name][i], fold[name], strict=True) if f != keep]
                value += objective(rows, weights)
            if value > best_value + 1e-12:
                best, best_value = i, value
        return best

    picked: list[SearchSettings] = []
    held: dict[str, list[Scores | None]] = {name: [None] * len(qs) for name, qs in questions.items()}
    for f in range(folds):
        i = pick(f)
        picked.append(points[i])
        for name in questions:
            for j, g in enumerate(fold[name]):
                if g == f:
                    held[name][j] = table[name][i][j]
    baseline = {name: [question_scores(devs[name], q, off) for q in qs] for name, qs in questions.items()}
    cats = {name: [q.sample.category for q in qs] for name, qs in questions.items()}
    return CrossValidation(picked, held, baseline, cats, points[pick(None)])


def report(cv: CrossValidation, metrics: Sequence[str] = (*RECENCY, "turn/latest_first", *RECALL)) -> str:
    """Markdown: held-out figures against supersession off, per data set and question category."""
    lines = ["| data set | group | metric | n | off | on (held-out) |", "|---|---|---|---:|---:|---:|"]
    for name, rows in cv.held_out.items():
        groups = {"all": [True] * len(rows)}
        for cat in dict.fromkeys(cv.categories[name]):
            groups[cat] = [c == cat for c in cv.categories[name]]
        for group, member in groups.items():
            on = means([r for r, m in zip(rows, member, strict=True) if m], metrics)
            base = means([r for r, m in zip(cv.off[name], member, strict=True) if m], metrics)
            for metric in metrics:
                (a, n), (b, _) = base[metric], on[metric]
                if n:
                    lines.append(f"| {name} | {group} | {metric} | {n} | {a:.3f} | {b:.3f} |")
    return "\n".join(lines)


def _settings_json(s: SearchSettings) -> dict[str, object]:
    return {k: v for k, v in s.to_json().items() if k.startswith("supersede")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlane.bench.retrieval.crossval", description=__doc__)
    parser.add_argument("datasets", nargs="+", help="data sets (their bench stores are reused, or ingested)")
    parser.add_argument("--categories", default="", help="DATASET=cat1,cat2;... keep only these categories")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--preset", default="hybrid", help="the ranking before supersession")
    parser.add_argument("--out", type=Path, help="write the figures and picks here as JSON")
    parser.add_argument("--collected", type=Path, help="keep the collected candidates in this pickle and reuse them")
    parser.add_argument("--tables", type=Path, help="keep each grid point's scores in this pickle and reuse them")
    args = parser.parse_args(argv)
    keep: dict[str, frozenset[str]] = {}
    for part in filter(None, args.categories.split(";")):
        name, _, cats = part.partition("=")
        keep[name] = frozenset(cats.split(","))
    base = PRESETS[args.preset]
    devs: dict[str, DevSet] = {}
    questions: dict[str, list[Question]] = {}
    saved: dict[str, DevSet] = {}
    if args.collected and args.collected.exists():
        with args.collected.open("rb") as f:
            saved = pickle.load(f)  # a file this command wrote
    for name in args.datasets:
        if name not in saved:
            # Only the namespaces of the kept categories are ingested and searched.
            options = RetrievalOptions(dataset=name, categories=tuple(sorted(keep.get(name, ()))))
            parts = [collect(options, split=split) for split in ("dev", "test")]
            saved[name] = replace(parts[0], questions=parts[0].questions + parts[1].questions)
            if args.collected:
                with args.collected.open("wb") as f:
                    pickle.dump(saved, f)
        dev = saved[name]
        devs[name] = dev
        questions[name] = prepare(dev, replace(base, supersede=False), keep.get(name))
        print(f"{name}: {len(questions[name])} questions", file=sys.stderr)
    points = grid_points(replace(base, supersede=True), DEFAULT_GRID)
    known: dict[str, dict[str, list[Scores | None]]] = {}
    if args.tables and args.tables.exists():
        with args.tables.open("rb") as f:
            known = pickle.load(f)  # a file this command wrote
    tables = {}
    for name, qs in questions.items():
        rows = known.setdefault(f"{name}|{','.join(sorted(keep.get(name, ())))}|{args.preset}", {})
        tables[name] = score_table(devs[name], qs, points, known=rows, progress=True)
        if args.tables:
            with args.tables.open("wb") as f:
                pickle.dump(known, f)
    off = replace(base, supersede=False)
    cv = cross_validate(devs, questions, points, off, folds=args.folds, tables=tables)
    print(report(cv))
    print("\npicked per fold:", [_settings_json(p) for p in cv.picked])
    print("chosen on every question:", _settings_json(cv.chosen))
    if args.out:
        written: dict[str, object] = {
            "picked": [_settings_json(p) for p in cv.picked],
            "chosen": _settings_json(cv.chosen),
            "report": report(cv),
        }
        args.out.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
