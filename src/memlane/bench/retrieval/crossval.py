"""Choosing the supersession rule and thresholds by cross-validation, and reading only held-out figures.

The questions of one or more data sets (their candidates collected once, as ``memlane bench tune`` does:
:func:`memlane.bench.retrieval.tune.collect`) are cut into ``folds`` folds by namespace (a LoCoMo
conversation, a LongMemEval question's haystack: questions that share a history never sit on both sides).
For each fold, every grid point is scored on the other folds' questions and the best is applied to the
held-out fold; the figures reported are those of the held-out folds, each question scored by a point chosen
without it. The setting to ship is the point the same objective picks on every question.

A grid point is the thresholds and the signals the rule reads (:data:`SIGNALS`: whether the question asks
for a current value, whether the two blocks state different values), so the signals are chosen, and
their held-out figures read, like the thresholds.

The objective counts every question's top of the ranking, not only the updates: per data set (each
counting once), the mean of the session and turn R_any@1, R_any@3, R_all@5, R_all@10, NDCG@10 and MRR, plus
the session ``latest_first`` and ``latest@1`` of LongMemEval's knowledge-update questions; and a point
that loses more than :data:`GUARD` of any of those top figures against supersession off, overall or on a
question type of 50 questions or more, pays :data:`GUARD_PENALTY` x the loss (:func:`guard`), so that
ordering updates never buys a worse top for the other questions.

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
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from memlane.bench.datasets.families import LOCOMO
from memlane.bench.datasets.model import Sample
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.retrieval.history import rank as rank_blocks
from memlane.bench.retrieval.metrics import HARMFUL, HELPFUL, MOVES
from memlane.bench.retrieval.run import RetrievalOptions
from memlane.bench.retrieval.runlog import MIN_RANKING_LENGTH
from memlane.bench.retrieval.tune import DevSet, QuestionCandidates, collect
from memlane.core import retrieval
from memlane.core.retrieval import PRESETS, Known, Scored, SearchSettings, Version, with_candidates
from memlane.core.retrieval.statements import version_of, with_sentences
from memlane.core.retrieval.supersession import NOW_WORDS

# The objective: the whole top of every question's ranking (what an agent reading the first hits sees) on
# every data set, and the newest version first on the questions whose evidence is a changed fact.
TOP = tuple(
    f"{level}/{m}"
    for level in ("session", "turn")
    for m in ("recall_any@1", "recall_any@3", "recall_all@5", "recall_all@10", "ndcg_any@10", "mrr")
)
RECENCY = ("session/latest_first", "session/latest@1")
UPDATES = "knowledge-update"  # the LongMemEval question type whose evidence is a fact told, then changed
DEFAULT_WEIGHTS: dict[str, float] = {**dict.fromkeys(TOP, 1.0), **{f"{UPDATES}:{m}": 1.0 for m in RECENCY}}
DEFAULT_GRID: dict[str, tuple[object, ...]] = {
    "signals": ("current+values", "current+kind"),
    "supersede_depth": (5, 10),
    "supersede_once": (0, 1),
    "supersede_present": (0, 1),
    "supersede_ratio": (0.3, 0.5, 0.7),
    "supersede_sessions": (0, 1),
}
# The grid of the rules before the kind of value, one move per older block and the wider reading of the present
# (docs/design/008-supersession.md, "How the rule and its thresholds were chosen"), which it keeps off.
SIGNALS_GRID: dict[str, tuple[object, ...]] = {
    "signals": ("similar", "now", "current", "current+numbers", "current+values", "now+values", "values"),
    "supersede_depth": (5, 10),
    "supersede_similarity": (0.0, 0.3, 0.5),
    "supersede_terms": (0.0, 0.5),
    "supersede_ratio": (0.3, 0.5, 0.7),
    "supersede_sessions": (0, 1),
    "supersede_once": (0,),
    "supersede_present": (0,),
}
# The signals a grid point uses to decide that a newer block restates an older one, beside the thresholds:
# the question's kind (``current``: asks for a current value, :func:`asks_current_value`; ``now``: only
# names the present, "currently", "now", "so far", "most recent") and the two blocks' values (``values``:
# numbers and names of the sentences that match the query; ``numbers``: numbers only). ``similar`` is
# neither: the rule before them. ``kind``: the values of the kind the question asks for, about its subject
# (``supersede_values="kind"``).
SIGNALS: dict[str, tuple[str, str]] = {
    "similar": ("any", "off"),
    "now": ("now", "off"),
    "current": ("current", "off"),
    "current+numbers": ("current", "numbers"),
    "current+values": ("current", "all"),
    "current+kind": ("current", "kind"),
    "values": ("any", "all"),
    "now+values": ("now", "all"),
}
Scores = dict[str, float]


@dataclass(frozen=True)
class Point:
    """One grid point: the settings (thresholds) and the signals (a key of :data:`SIGNALS`), which set the
    settings' ``supersede_current`` and ``supersede_values`` (:meth:`resolved`)."""

    settings: SearchSettings
    signals: str = "current+values"

    def resolved(self) -> SearchSettings:
        gate, values = SIGNALS[self.signals]
        return replace(self.settings, supersede_current=gate == "current", supersede_values=values)


@dataclass
class Question:
    """One question, its ranking before supersession, what supersession reads of its candidates (with all
    values, and with numbers only), and its scores by the order of its first blocks (most points leave most
    rankings as they were, many give the same order)."""

    dataset: str
    sample: Sample
    candidates: QuestionCandidates
    ranked: Scored
    versions: dict[int, Version] = field(default_factory=dict)
    memo: dict[tuple[int, ...], Scores | None] = field(default_factory=dict)


def fold_of(namespace: str, folds: int) -> int:
    """The fold of a namespace: a hash, so the same namespace is in the same fold on every run."""
    return int.from_bytes(hashlib.sha256(namespace.encode("utf-8")).digest()[:8], "big") % folds


def prepare(dev: DevSet, base: SearchSettings, categories: frozenset[str] | None = None) -> list[Question]:
    """Each collected question (of ``categories``, when given) ranked once under ``base`` without
    supersession: the grid varies only the supersession settings, which apply after ranking. What
    supersession reads of each candidate is read again from its block (the collected vectors kept)."""
    out = []
    settings = with_candidates(replace(base, supersede=False), dev.depth)
    for q in dev.questions:
        if categories is not None and q.sample.category not in categories:
            continue
        asked, until = retrieval.asked_at(q.sample.question_date)
        ordered = retrieval.order(q.candidates, settings, Known(q.blocks, q.versions), asked=asked, until=until)
        versions = {  # read once here, not at every grid point
            ref: with_sentences(replace(version_of(q.blocks[ref]), vectors=v.vectors))
            for ref, v in q.versions.items()
            if ref in q.blocks
        }
        out.append(Question(dev.dataset, q.sample, q, ordered.ranked, versions))
    return out


def _rankings(dev: DevSet, q: Question, ranked: Scored) -> tuple[list[str], list[str]]:
    blocks = q.candidates.blocks
    r = rank_blocks((blocks[ref] for ref, _, _ in ranked[: dev.depth]), q.candidates.index,
                    max(MIN_RANKING_LENGTH, max(dev.ks)))  # fmt: skip
    return list(r.session_ids), list(r.turn_ids)


def question_scores(dev: DevSet, q: Question, settings: SearchSettings, signals: str | None = None) -> Scores | None:
    """The harness's scores of one question with supersession under ``settings`` (as a bench run's search,
    which passes the question date as ``at``), with what it moved (the run's audit). ``signals`` (a key of
    :data:`SIGNALS`) overrides the settings' ``supersede_current`` and ``supersede_values``."""
    family = DATASETS[dev.dataset].family
    if family == LOCOMO and q.sample.category_number not in (1, 2, 3, 4):
        return None
    versions = q.versions or q.candidates.versions
    if signals is not None:
        settings = Point(settings, signals).resolved()
        if SIGNALS[signals][0] == "now" and not NOW_WORDS.search(q.sample.question):
            settings = replace(settings, supersede=False)
    asked, until = retrieval.asked_at(q.sample.question_date)
    known = Known(q.candidates.blocks, versions)
    # Ranked once (prepare): the grid varies only supersession.
    ranked = retrieval.order(q.candidates.candidates, settings, known, asked=asked, until=until, ranked=q.ranked).ranked
    order = tuple(ref for ref, _, _ in ranked[: dev.depth])
    if order in q.memo:
        return q.memo[order]
    session_ids, turn_ids = _rankings(dev, q, ranked)
    before = _rankings(dev, q, q.ranked)
    dates = q.candidates.index.session_dates
    scores = family.score(q.sample, session_ids, turn_ids, dev.ks, session_dates=dates, before=before)
    q.memo[order] = scores
    return scores


def grid_points(base: SearchSettings, grid: Mapping[str, Sequence[object]]) -> list[Point]:
    """Every combination of the grid's values over ``base`` (``signals``: keys of :data:`SIGNALS`)."""
    names = list(grid)
    kinds = {f.name: type(getattr(base, f.name)) for f in fields(base)}
    points = []
    for values in itertools.product(*(grid[n] for n in names)):
        point: dict[str, object] = {}
        signals = "current+values"
        for n, v in zip(names, values, strict=True):
            if n == "signals":
                signals = str(v)
            else:
                point[n] = bool(v) if kinds[n] is bool else kinds[n](str(v))
        points.append(Point(replace(base, **point), signals))  # type: ignore[arg-type]
    return points


def objective(
    rows: Sequence[Mapping[str, float] | None],
    weights: Mapping[str, float],
    categories: Sequence[str] | None = None,
) -> float:  # rows: per-question scores of one data set
    """The weighted sum of each metric's mean over the rows that carry it; a weight named
    ``CATEGORY:metric`` counts the rows of that category only (``categories``: each row's)."""
    total = 0.0
    for name, weight in weights.items():
        category, _, metric = name.rpartition(":")
        values = [
            r[metric]
            for i, r in enumerate(rows)
            if r is not None
            and metric in r
            and (not category or (categories is not None and categories[i] == category))
        ]
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

    picked: list[Point]
    held_out: dict[str, list[Scores | None]]
    off: dict[str, list[Scores | None]]
    categories: dict[str, list[str]]
    chosen: Point


def point_key(point: Point) -> str:
    """A grid point as a stable text (its supersession settings and signals)."""
    return json.dumps(point_json(point), sort_keys=True)


def point_json(point: Point) -> dict[str, object]:
    """A grid point's supersession settings and signals."""
    settings = {k: v for k, v in point.resolved().to_json().items() if k.startswith("supersede")}
    return settings | {"signals": point.signals}


def score_table(
    dev: DevSet,
    questions: Sequence[Question],
    points: Sequence[Point],
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
        rows.append([question_scores(dev, q, p.settings, p.signals) for q in questions])
        if known is not None:
            known[key] = rows[-1]
        if progress and (i + 1) % 20 == 0:
            print(f"{dev.dataset}: grid point {i + 1}/{len(points)}", file=sys.stderr, flush=True)
    return rows


GUARD = 0.005  # what a top figure may lose against supersession off before the objective pays for it
GUARD_PENALTY = 100.0
GUARD_MIN_QUESTIONS = 50  # a question type is guarded from this many questions on (in the folds picked on)


def guard(
    rows: Sequence[Scores | None],
    off: Sequence[Scores | None],
    categories: Sequence[str],
    metrics: Sequence[str] = TOP,
    min_questions: int = GUARD_MIN_QUESTIONS,
) -> float:
    """How far the top figures of ``rows`` fall below supersession ``off``'s minus :data:`GUARD`, summed
    over the metrics, overall and for every question type of :data:`GUARD_MIN_QUESTIONS` or more."""
    groups: dict[str, list[int]] = {"": list(range(len(rows)))}
    for i, c in enumerate(categories):
        groups.setdefault(c, []).append(i)
    short = 0.0
    for members in groups.values():
        scored = [i for i in members if rows[i] is not None and off[i] is not None]
        if len(scored) < min_questions and members is not groups[""]:
            continue
        on_means = means([rows[i] for i in scored], metrics)
        off_means = means([off[i] for i in scored], metrics)
        for m in metrics:
            if on_means[m][1]:
                short += max(0.0, off_means[m][0] - GUARD - on_means[m][0])
    return short


HARM_SHARE = 0.05  # the share of moves that may be harmful (a non-evidence item moved above evidence)


def harm(rows: Sequence[Scores | None], share: float = HARM_SHARE) -> float:
    """How far the share of harmful moves in ``rows`` exceeds ``share``, summed over the session and turn
    levels (0 where nothing moved)."""
    excess = 0.0
    for level in ("session", "turn"):
        moved = sum(r.get(f"{level}/{MOVES}", 0.0) for r in rows if r is not None)
        harmful = sum(r.get(f"{level}/{HARMFUL}", 0.0) for r in rows if r is not None)
        if moved:
            excess += max(0.0, harmful / moved - share)
    return excess


def cross_validate(
    devs: Mapping[str, DevSet],
    questions: Mapping[str, list[Question]],
    points: Sequence[Point],
    off: SearchSettings,
    *,
    folds: int = 5,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    guarded: bool = True,
    guard_min_questions: int = GUARD_MIN_QUESTIONS,
    harm_guarded: bool = True,
    progress: bool = False,
    tables: Mapping[str, list[list[Scores | None]]] | None = None,
) -> CrossValidation:
    """Score every point on every question once (``tables``: those scores, per data set, already computed
    by :func:`score_table`), then pick per fold on the other folds (see the module doc): the objective adds
    the data sets' objectives, each data set counting once whatever its number of questions, and with
    ``guarded`` takes off :data:`GUARD_PENALTY` x what :func:`guard` finds lost (a loss past the guard
    outweighs any gain in ordering), and with ``harm_guarded`` the same multiple of the share of harmful
    moves past :data:`HARM_SHARE` (:func:`harm`)."""
    table = dict(tables) if tables is not None else {}
    for name, qs in questions.items():
        if name not in table:
            table[name] = score_table(devs[name], qs, points, progress=progress)
    fold = {name: [fold_of(q.sample.namespace, folds) for q in qs] for name, qs in questions.items()}
    cats = {name: [q.sample.category for q in qs] for name, qs in questions.items()}
    baseline = {name: [question_scores(devs[name], q, off) for q in qs] for name, qs in questions.items()}

    def pick(keep: int | None) -> int:
        best, best_value = 0, -math.inf
        for i in range(len(points)):
            value = 0.0
            for name in questions:
                inside = [j for j, f in enumerate(fold[name]) if f != keep]
                rows = [table[name][i][j] for j in inside]
                in_cats = [cats[name][j] for j in inside]
                value += objective(rows, weights, in_cats)
                if guarded:
                    lost = guard(rows, [baseline[name][j] for j in inside], in_cats, min_questions=guard_min_questions)
                    value -= GUARD_PENALTY * lost
                if harm_guarded:
                    value -= GUARD_PENALTY * harm(rows)
            if value > best_value + 1e-12:
                best, best_value = i, value
        return best

    picked: list[Point] = []
    held: dict[str, list[Scores | None]] = {name: [None] * len(qs) for name, qs in questions.items()}
    for f in range(folds):
        i = pick(f)
        picked.append(points[i])
        for name in questions:
            for j, g in enumerate(fold[name]):
                if g == f:
                    held[name][j] = table[name][i][j]
    return CrossValidation(picked, held, baseline, cats, points[pick(None)])


AUDIT = tuple(f"{level}/{m}" for level in ("session", "turn") for m in (MOVES, HARMFUL, HELPFUL))


# The goals the held-out figures are read against: the updates' newest evidence first, nothing else paying
# (each of these top figures, overall and per question type of GUARD_MIN_QUESTIONS or more, at most GUARD
# below supersession off), and at most HARM_SHARE of the moves harmful, per data set and level.
GOAL_FIGURES = tuple(
    f"{level}/{m}"
    for level in ("session", "turn")
    for m in ("recall_any@1", "recall_any@3", "recall_all@5", "recall_all@10", "ndcg_any@10")
)
UPDATE_GOALS = {"session/latest_first": 0.90, "session/latest@1": 0.80}


def goals(cv: CrossValidation) -> str:
    """Markdown: each goal against the held-out figures: the updates' newest evidence first, every top figure
    that falls more than :data:`GUARD` below supersession off (overall or in a question type of
    :data:`GUARD_MIN_QUESTIONS` or more), and the share of harmful moves per data set and level."""
    lines = ["| goal | data set | group | figure | off | held out | met |", "|---|---|---|---|---:|---:|---|"]
    for name, rows in cv.held_out.items():
        cats = cv.categories[name]
        updates = [r for r, c in zip(rows, cats, strict=True) if c == UPDATES]
        for metric, floor in UPDATE_GOALS.items() if updates else ():
            (on, _), (off, _) = (
                means(updates, [metric])[metric],
                means([r for r, c in zip(cv.off[name], cats, strict=True) if c == UPDATES], [metric])[metric],
            )
            lines.append(f"| updates first | {name} | {UPDATES} | {metric} >= {floor:g} | {off:.3f} | {on:.3f} | "
                         f"{'yes' if on >= floor else 'no'} |")  # fmt: skip
        groups: dict[str, list[int]] = {"all": list(range(len(rows)))}
        for i, c in enumerate(cats):
            groups.setdefault(c, []).append(i)
        lost = 0
        for group, members in groups.items():
            scored = [i for i in members if rows[i] is not None]
            if group != "all" and len(scored) < GUARD_MIN_QUESTIONS:
                continue
            on_m, off_m = (
                means([rows[i] for i in scored], GOAL_FIGURES),
                means([cv.off[name][i] for i in scored], GOAL_FIGURES),
            )
            for metric in GOAL_FIGURES:
                (a, n), (b, _) = off_m[metric], on_m[metric]
                if n and b < a - GUARD:
                    lost += 1
                    lines.append(f"| nothing else pays | {name} | {group} | {metric} | {a:.3f} | {b:.3f} | no |")
        if not lost:
            lines.append(f"| nothing else pays | {name} | every group | every top figure | | | yes |")
        for level in ("session", "turn"):
            moved = sum(r.get(f"{level}/{MOVES}", 0.0) for r in rows if r is not None)
            harmful = sum(r.get(f"{level}/{HARMFUL}", 0.0) for r in rows if r is not None)
            share = harmful / moved if moved else 0.0
            met = "yes" if share <= HARM_SHARE else "no"
            lines.append(f"| harmful moves <= {HARM_SHARE:g} | {name} | all | {level}: {harmful:.0f} of {moved:.0f} | | {share:.3f} | {met} |")  # fmt: skip  # noqa: E501
    return "\n".join(lines)


def report(cv: CrossValidation, metrics: Sequence[str] = (*TOP, *RECENCY, "turn/latest_first")) -> str:
    """Markdown: held-out figures against supersession off, per data set and question category (categories
    of 50 questions or more, and the knowledge updates), and the held-out moves."""
    lines = ["| data set | group | metric | n | off | on (held-out) |", "|---|---|---|---:|---:|---:|"]
    audit = ["| data set | group | level | moved | harmful | helpful |", "|---|---|---|---:|---:|---:|"]
    for name, rows in cv.held_out.items():
        groups = {"all": [r is not None for r in rows]}
        for cat in dict.fromkeys(cv.categories[name]):
            groups[cat] = [c == cat and r is not None for c, r in zip(cv.categories[name], rows, strict=True)]
        for group, member in groups.items():
            if group != "all" and group != UPDATES and sum(member) < 50:
                continue
            on = means([r for r, m in zip(rows, member, strict=True) if m], [*metrics, *AUDIT])
            base = means([r for r, m in zip(cv.off[name], member, strict=True) if m], metrics)
            for metric in metrics:
                (a, n), (b, _) = base[metric], on[metric]
                if n:
                    lines.append(f"| {name} | {group} | {metric} | {n} | {a:.3f} | {b:.3f} |")
            for level in ("session", "turn"):
                moved, harmful, helpful = (
                    round(on[f"{level}/{m}"][0] * on[f"{level}/{m}"][1]) if on[f"{level}/{m}"][1] else 0
                    for m in (MOVES, HARMFUL, HELPFUL)
                )
                audit.append(f"| {name} | {group} | {level} | {moved} | {harmful} | {helpful} |")
    return "\n".join([*lines, "", *audit])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlane.bench.retrieval.crossval", description=__doc__)
    parser.add_argument("datasets", nargs="+", help="data sets (their bench stores are reused, or ingested)")
    parser.add_argument("--categories", default="", help="DATASET=cat1,cat2;... keep only these categories")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--preset", default="hybrid", help="the ranking before supersession")
    parser.add_argument(
        "--unguarded", action="store_true", help="pick by the objective alone, without the guard on the top figures"
    )
    parser.add_argument(
        "--guard-min-questions",
        type=int,
        default=GUARD_MIN_QUESTIONS,
        help="guard the question types of at least this many questions (the overall figures always)",
    )
    parser.add_argument(
        "--no-harm-guard",
        action="store_true",
        help=f"do not charge a point whose share of harmful moves exceeds {HARM_SHARE:g}",
    )
    parser.add_argument(
        "--grid",
        choices=("default", "signals"),
        default="default",
        help="default: the kind of value, one move per older block and the wider present; signals: the grid of the "
        "rules before them (SIGNALS_GRID)",
    )
    parser.add_argument("--signals", default="", help="comma-separated keys of SIGNALS to grid (default: the grid's)")
    parser.add_argument("--out", type=Path, help="write the figures and picks here as JSON")
    parser.add_argument(
        "--collected",
        type=Path,
        action="append",
        default=[],
        help="reuse the collected candidates in these pickles (repeatable: one per data set); those collected "
        "now are added to the first",
    )
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
    for path in args.collected:
        if path.exists():
            with path.open("rb") as f:
                saved |= pickle.load(f)  # a file this command wrote
    for name in args.datasets:
        if name not in saved:
            # Only the namespaces of the kept categories are ingested and searched.
            options = RetrievalOptions(dataset=name, categories=tuple(sorted(keep.get(name, ()))))
            parts = [collect(options, split=split) for split in ("dev", "test")]
            saved[name] = replace(parts[0], questions=parts[0].questions + parts[1].questions)
            if args.collected:
                with args.collected[0].open("wb") as f:
                    pickle.dump(saved, f)
        dev = saved[name]
        devs[name] = dev
        questions[name] = prepare(dev, replace(base, supersede=False), keep.get(name))
        print(f"{name}: {len(questions[name])} questions", file=sys.stderr)
    grid = dict(DEFAULT_GRID if args.grid == "default" else SIGNALS_GRID)
    if args.signals:
        grid["signals"] = tuple(args.signals.split(","))
    points = grid_points(replace(base, supersede=True), grid)
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
    cv = cross_validate(
        devs,
        questions,
        points,
        off,
        folds=args.folds,
        tables=tables,
        guarded=not args.unguarded,
        guard_min_questions=args.guard_min_questions,
        harm_guarded=not args.no_harm_guard,
    )
    print(report(cv))
    print("\n" + goals(cv))
    print("\npicked per fold:", [point_json(p) for p in cv.picked])
    print("chosen on every question:", point_json(cv.chosen))
    if args.out:
        written: dict[str, object] = {
            "picked": [point_json(p) for p in cv.picked],
            "chosen": point_json(cv.chosen),
            "report": report(cv),
            "goals": goals(cv),
        }
        args.out.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
