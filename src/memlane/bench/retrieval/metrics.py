"""LLM-free retrieval metrics: the official LongMemEval ones, LoCoMo evidence recall, aggregation.

LongMemEval (``src/retrieval/eval_utils.py`` and ``run_retrieval.py`` of xiaowu0162/LongMemEval):

* relevant turns = user turns with ``has_answer: true`` (``Sample.user_evidence_turn_ids``); relevant
  sessions = the sessions of those turns (an ``answer_`` session without such a turn is renamed ``noans``
  by the official code, so it is not relevant);
* ``recall_any@k`` / ``recall_all@k``: some / every relevant id is in the top k;
* ``ndcg_any@k``: binary relevance, DCG = rel_1 + sum_{i=2..k} rel_i / log2(i) (positions 1 and 2 both
  weigh 1: the official formula), ideal DCG from the whole corpus' relevances, truncated at k;
* turn -> session ("turn2session"): each ranked turn is mapped to its session by dropping the last
  ``_<i>``; a turn of an evidence session that is not itself relevant keeps the official ``noans`` key, so
  it counts as a *different*, non-relevant session; k grows to the smallest k' >= k whose top-k' turns
  cover k distinct keys (or the list ends, k' = len + 1); recall and NDCG are computed at k' over the turn
  positions, with the ideal DCG from the number of relevant turns;
* questions are skipped (score ``None``) when abstention (``'_abs'`` in the id) or without a relevant
  user turn.

Beside them, for the top of a ranking (what an agent that reads only the first few hits sees): ``mrr``, the
reciprocal rank of the first relevant item (0 when the ranking holds none; the official scripts have no
MRR, this is the textbook one), at session and turn level on both data sets, and for LoCoMo the same
``ndcg_any@k`` as LongMemEval's (LoCoMo's official scoring has no rank-sensitive figure).

The official code ranks the whole corpus, whose turn documents are the *user* turns only (session
documents: the user turns joined). For identical numbers pass complete rankings (or at least long enough to
cover k distinct sessions) of user turns; any other ranked turn simply counts as non-relevant.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memlane.bench.datasets.longmemeval import longmemeval_session_of
from memlane.bench.datasets.model import Sample
from memlane.core.errors import ValidationError

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)
_NOANS = "noans:"


def _check_ranking(ranked: Sequence[str], what: str) -> None:
    if len(set(ranked)) != len(ranked):
        dupes = sorted(x for x, n in Counter(ranked).items() if n > 1)
        raise ValidationError(f"ranking has duplicates: {dupes[:5]}", where=what)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValidationError(f"k must be >= 1, got {k}", where="k")


def dcg(relevances: Sequence[float], k: int) -> float:
    """Official LongMemEval DCG of the first ``k`` relevances: rel_1 + sum_{i=2..k} rel_i / log2(i)."""
    rels = list(relevances)[:k]
    if not rels:
        return 0.0
    return rels[0] + sum(r / math.log2(i) for i, r in enumerate(rels[1:], start=2))


def recall_any_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if at least one relevant id is among the top ``k``, else 0.0."""
    _check_k(k)
    top = set(ranked[:k])
    return float(any(r in top for r in relevant))


def recall_all_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if every relevant id is among the top ``k`` (vacuously 1.0 for no relevant ids), else 0.0."""
    _check_k(k)
    top = set(ranked[:k])
    return float(all(r in top for r in relevant))


def recall_fraction_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Fraction of the relevant ids among the top ``k`` (LoCoMo's official RAG recall); 0.0 if none."""
    _check_k(k)
    if not relevant:
        return 0.0
    top = set(ranked[:k])
    return sum(r in top for r in relevant) / len(relevant)


def ndcg_any_at_k(
    ranked: Sequence[str],
    relevant: Collection[str],
    k: int,
    n_relevant: int | None = None,
) -> float:
    """Official binary NDCG@k. ``n_relevant`` = relevant items in the corpus (default ``len(relevant)``)."""
    _check_k(k)
    n_rel = len(relevant) if n_relevant is None else n_relevant
    ideal = dcg([1.0] * min(k, n_rel), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if x in relevant else 0.0 for x in ranked[:k]], k) / ideal


def reciprocal_rank(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """1 / the 1-based position of the first relevant id in ``ranked``; 0.0 when none is there."""
    for i, item in enumerate(ranked, start=1):
        if item in relevant:
            return 1.0 / i
    return 0.0


def turn_to_session_keys(ranked_turn_ids: Sequence[str], relevant_turn_ids: Collection[str]) -> list[str]:
    """Map a turn ranking to official session keys, position by position (see module doc)."""
    relevant_sessions = {longmemeval_session_of(t) for t in relevant_turn_ids}
    keys = []
    for t in ranked_turn_ids:
        session = longmemeval_session_of(t)
        if session in relevant_sessions and t not in relevant_turn_ids:
            session = _NOANS + session
        keys.append(session)
    return keys


def effective_k(keys: Sequence[str], k: int) -> int:
    """Smallest k' >= k whose top-k' keys hold k distinct values; ``len(keys) + 1`` if none does
    (and ``k`` itself when ``k > len(keys)``), exactly like the official loop."""
    _check_k(k)
    eff = k
    seen = set(keys[:eff])
    while eff <= len(keys) and len(seen) < k:
        if eff < len(keys):
            seen.add(keys[eff])
        eff += 1
    return eff


def _three(
    ranked: Sequence[str],
    relevant: Collection[str],
    k: int,
    n_relevant: int | None = None,
    label: int | None = None,
) -> dict[str, float]:
    at = k if label is None else label
    return {
        f"recall_any@{at}": recall_any_at_k(ranked, relevant, k),
        f"recall_all@{at}": recall_all_at_k(ranked, relevant, k),
        f"ndcg_any@{at}": ndcg_any_at_k(ranked, relevant, k, n_relevant),
    }


def turn_to_session_metrics(
    ranked_turn_ids: Sequence[str], relevant_turn_ids: Collection[str], k: int
) -> dict[str, float]:
    """Official session-level metrics of a turn ranking at the expanded k' (keys still say ``@k``)."""
    relevant = set(relevant_turn_ids)
    keys = turn_to_session_keys(ranked_turn_ids, relevant)
    sessions = {longmemeval_session_of(t) for t in relevant}
    eff = effective_k(keys, k)
    return _three(keys, sessions, eff, n_relevant=len(relevant), label=k)


def _prefixed(level: str, scores: Mapping[str, float]) -> dict[str, float]:
    return {f"{level}/{name}": value for name, value in scores.items()}


def score_longmemeval(
    sample: Sample,
    ranked_session_ids: Sequence[str] | None,
    ranked_turn_ids: Sequence[str] | None,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float] | None:
    """Official metrics of one question: ``session/…`` from the session ranking, ``turn/…`` and
    ``turn2session/…`` from the turn ranking (a ``None`` ranking omits its level).

    Returns ``None`` for skipped questions (abstention, or no user turn with ``has_answer``).
    """
    if sample.is_abstention or not sample.user_evidence_turn_ids:
        return None
    relevant_turns = set(sample.user_evidence_turn_ids)
    relevant_sessions = {longmemeval_session_of(t) for t in relevant_turns}
    out: dict[str, float] = {}
    if ranked_session_ids is not None:
        _check_ranking(ranked_session_ids, f"{sample.sample_id}: ranked_session_ids")
        for k in ks:
            out.update(_prefixed("session", _three(ranked_session_ids, relevant_sessions, k)))
        out["session/mrr"] = reciprocal_rank(ranked_session_ids, relevant_sessions)
    if ranked_turn_ids is not None:
        _check_ranking(ranked_turn_ids, f"{sample.sample_id}: ranked_turn_ids")
        for k in ks:
            out.update(_prefixed("turn", _three(ranked_turn_ids, relevant_turns, k)))
            out.update(_prefixed("turn2session", turn_to_session_metrics(ranked_turn_ids, relevant_turns, k)))
        out["turn/mrr"] = reciprocal_rank(ranked_turn_ids, relevant_turns)
    return out


def _locomo_level(
    ranked: Sequence[str], relevant: Sequence[str], ks: Sequence[int], on_empty: Literal["skip", "one"]
) -> dict[str, float]:
    names = ("recall_all", "recall_any", "recall")
    if not relevant:
        # The official LoCoMo scorer gives recall 1 to questions without evidence.
        return {f"{n}@{k}": 1.0 for k in ks for n in names} if on_empty == "one" else {}
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall_all@{k}"] = recall_all_at_k(ranked, relevant, k)
        out[f"recall_any@{k}"] = recall_any_at_k(ranked, relevant, k)
        out[f"recall@{k}"] = recall_fraction_at_k(ranked, relevant, k)
        out[f"ndcg_any@{k}"] = ndcg_any_at_k(ranked, set(relevant), k)
    out["mrr"] = reciprocal_rank(ranked, set(relevant))
    return out


def score_locomo(
    sample: Sample,
    ranked_dia_ids: Sequence[str] | None,
    ranked_session_ids: Sequence[str] | None,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    on_empty: Literal["skip", "one"] = "skip",
) -> dict[str, float] | None:
    """LoCoMo evidence recall of one question: ``turn/recall_all@k``, ``turn/recall_any@k``,
    ``turn/recall@k`` (fraction) over dia_ids, the same with ``session/`` over ``session_<n>`` ids; beside
    them ``ndcg_any@k`` (LongMemEval's formula) and ``mrr`` at both levels (only for questions with evidence).

    Evidence is the cleaned evidence of the sample (malformed entries split/repaired, dangling ids kept
    at session level only). A level with no evidence is omitted (``on_empty="skip"``) or scored 1.0
    (``"one"``, the official convention); ``None`` if nothing is left to score.
    """
    out: dict[str, float] = {}
    if ranked_dia_ids is not None:
        _check_ranking(ranked_dia_ids, f"{sample.sample_id}: ranked_dia_ids")
        out.update(_prefixed("turn", _locomo_level(ranked_dia_ids, sample.evidence_turn_ids, ks, on_empty)))
    if ranked_session_ids is not None:
        _check_ranking(ranked_session_ids, f"{sample.sample_id}: ranked_session_ids")
        level = _locomo_level(ranked_session_ids, sample.evidence_session_ids, ks, on_empty)
        out.update(_prefixed("session", level))
    return out or None


LATEST_FIRST = "latest_first"
LATEST_AT_1 = "latest@1"


def recency_scores(
    ranked: Sequence[str], evidence: Collection[str], dates: Mapping[str, datetime | None]
) -> dict[str, float]:
    """Whether a ranking puts the newest version of a fact first: for evidence whose items (sessions or
    turns) carry at least two different dates (``dates``: an item's date; undated items take no part),
    ``latest_first`` is 1.0 when the best-ranked newest evidence item ranks above every older evidence
    item, and ``latest@1`` is 1.0 when the ranking's first item is a newest evidence item. An evidence
    item missing from ``ranked`` ranks below every item in it. Evidence with fewer than two dates is not
    scored (an empty dict): there is no newer version to put first."""
    dated = {item: d for item in evidence if (d := dates.get(item)) is not None}
    if len(set(dated.values())) < 2:
        return {}
    newest = max(dated.values())
    position = {item: i for i, item in enumerate(ranked)}
    missing = len(ranked)
    best_new = min(position.get(item, missing) for item, d in dated.items() if d == newest)
    best_old = min(position.get(item, missing) for item, d in dated.items() if d < newest)
    first = ranked[0] if ranked else None
    return {
        LATEST_FIRST: float(best_new < best_old),
        LATEST_AT_1: float(first is not None and dated.get(first) == newest),
    }


def recency_metrics(
    session_ids: Sequence[str] | None,
    turn_ids: Sequence[str] | None,
    evidence_sessions: Collection[str],
    evidence_turns: Collection[str],
    session_dates: Mapping[str, datetime | None],
    session_of: Callable[[str], str],
) -> dict[str, float]:
    """:func:`recency_scores` at session level (``session/latest_first``, ``session/latest@1``) and at
    turn level (``turn/…``; a turn is dated by its session), for the levels ranked (a ``None`` ranking
    omits its level)."""
    out: dict[str, float] = {}
    if session_ids is not None:
        out.update(_prefixed("session", recency_scores(session_ids, evidence_sessions, session_dates)))
    if turn_ids is not None:
        turn_dates = {t: session_dates.get(session_of(t)) for t in evidence_turns}
        out.update(_prefixed("turn", recency_scores(turn_ids, evidence_turns, turn_dates)))
    return out


MOVES, HARMFUL, HELPFUL = "moves", "moves_harmful", "moves_helpful"


def move_audit(before: Sequence[str], after: Sequence[str], evidence: Collection[str]) -> dict[str, float]:
    """What a reordering (supersession) did to one ranking: ``moves``, the items that rank higher in
    ``after`` than in ``before``; of those, ``moves_harmful``, a non-evidence item moved above at least one
    evidence item it ranked below, and ``moves_helpful``, an evidence item moved above at least one
    non-evidence item. A move that passes only evidence, or only non-evidence, is neither. Items missing
    from either ranking take no part."""
    old = {item: i for i, item in enumerate(before)}
    new = {item: i for i, item in enumerate(after)}
    both = [item for item in after if item in old]
    moved = harmful = helpful = 0
    for item in both:
        if new[item] >= old[item]:
            continue
        passed = [y for y in both if old[y] < old[item] and new[y] > new[item]]
        if not passed:
            continue
        moved += 1
        if item in evidence:
            helpful += any(y not in evidence for y in passed)
        else:
            harmful += any(y in evidence for y in passed)
    return {MOVES: float(moved), HARMFUL: float(harmful), HELPFUL: float(helpful)}


def move_metrics(
    before: tuple[Sequence[str], Sequence[str] | None],
    after: tuple[Sequence[str], Sequence[str] | None],
    evidence_sessions: Collection[str],
    evidence_turns: Collection[str],
) -> dict[str, float]:
    """:func:`move_audit` at session level (``session/moves``, ...) and turn level (``turn/...``, when both
    turn rankings are given): ``before`` and ``after`` are (session ids, turn ids) rankings."""
    out = _prefixed("session", move_audit(before[0], after[0], set(evidence_sessions)))
    if before[1] is not None and after[1] is not None:
        out.update(_prefixed("turn", move_audit(before[1], after[1], set(evidence_turns))))
    return out


@dataclass(frozen=True)
class GroupSummary:
    """Means of one group. ``n`` scored questions, ``skipped`` questions whose score was ``None``;
    ``means[m]`` averages metric ``m`` over the ``counts[m]`` scored questions that carry it."""

    n: int
    skipped: int
    means: dict[str, float]
    counts: dict[str, int]


OVERALL = "overall"
TASK_AVERAGE = "task-average"


def _summarise(scores: Sequence[Mapping[str, float]], skipped: int) -> GroupSummary:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for s in scores:
        for name, value in s.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1
    return GroupSummary(len(scores), skipped, {m: sums[m] / counts[m] for m in sums}, counts)


def aggregate(scored: Iterable[tuple[str, Mapping[str, float] | None]]) -> dict[str, GroupSummary]:
    """Per-category and overall means of per-question metric dicts, given ``(category, scores)`` pairs.

    Keys: each category (first-seen order), ``"overall"`` (mean over questions) and ``"task-average"``
    (unweighted mean of the per-category means, LongMemEval's task-averaged figure; ``n`` is then the
    number of categories contributing).
    """
    groups: dict[str, list[Mapping[str, float]]] = {}
    skipped: dict[str, int] = {}
    for category, scores in scored:
        groups.setdefault(category, [])
        skipped.setdefault(category, 0)
        if scores is None:
            skipped[category] += 1
        else:
            groups[category].append(scores)
    out = {c: _summarise(groups[c], skipped[c]) for c in groups}
    every = [s for g in groups.values() for s in g]
    out[OVERALL] = _summarise(every, sum(skipped.values()))
    per_cat = [g.means for c, g in out.items() if c != OVERALL and g.n > 0]
    task = _summarise(per_cat, 0)
    out[TASK_AVERAGE] = GroupSummary(len(per_cat), 0, task.means, task.counts)
    return out
