"""Re-score a retrieval run's exported rankings from the raw data set file, independently of memlane's metric
code, and check the run's ``results.json`` against it; also score the rankings the way peers' own benchmark
scripts do (docs/bench/peers.md).

    python scripts/rescore_rankings.py RUN_DIR [--data FILE] [--json]

It reads only ``rankings.<mode>.jsonl``, ``results.json`` (the figures to check) and the data set's own JSON
file (LoCoMo ``locomo10.json[.xz]``, LongMemEval ``longmemeval_s_cleaned*.json[.xz]``; default: the copy
shipped with memlane for LoCoMo, ``$MEMLANE_DATA/longmemeval/`` for LongMemEval). Nothing of memlane is
imported: relevance, skipping rules and recall are written again here from the official definitions.

* official (LongMemEval ``src/retrieval/eval_utils.py``): relevant turns are user turns with ``has_answer``
  (turn id ``<session_id>_<i>``, ``i`` 1-based over both roles), relevant sessions hold one; abstention
  questions (``_abs``) and questions without a relevant turn are skipped. LoCoMo: the evidence dia_ids
  (``D<s>:<t>``, read leniently from malformed entries; an id naming no turn counts at session level only)
  and their sessions; questions without evidence skipped; ``overall (1-4)`` = categories 1-4.
  Besides recall_any / recall_all at 5 and 10: recall_any at 1 and 3, NDCG@10 (LongMemEval's formula,
  applied to LoCoMo's evidence too) and MRR (1 / the rank of the first relevant item, 0 if none).
* ``peer-any``: what engram-search's benchmark scripts compute, ``recall_any@k`` over the session ranking
  against the data set's answer sessions (LongMemEval ``answer_session_ids``; LoCoMo the evidence's
  sessions), over every question that has one, abstention included, all LoCoMo categories.

Exit 1 if any official figure disagrees with ``results.json`` (which keeps 6 decimals: a figure ending in an
exact half may round either way).
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

KS = (5, 10)
TOP_KS = (1, 3)
TOLERANCE = (
    5e-7 + 1e-9
)  # results.json's 6 decimals, and the float error of an exact half  # recall_any only: the top of the ranking
ROOT = Path(__file__).resolve().parents[1]
LOCOMO_FILE = ROOT / "src" / "memlane" / "bench" / "datasets" / "data" / "locomo" / "locomo10.json.xz"
EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def load_json(path: Path) -> Any:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return json.load(f)


def default_data(dataset: str) -> Path:
    if dataset == "locomo":
        return LOCOMO_FILE
    if dataset != "longmemeval-s":
        raise SystemExit(f"{dataset}: pass the data set's file with --data")
    base = Path(os.environ.get("MEMLANE_DATA", "")) / "longmemeval"
    found = sorted(base.glob("longmemeval_s_cleaned*.json*"))
    if not found:
        raise SystemExit(f"no LongMemEval-S file under {base}: pass --data FILE or set MEMLANE_DATA")
    return found[0]


def read_rankings(path: Path) -> dict[str, dict[str, list[str]]]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            key = obj.get("question_id") or obj["qa_id"]
            out[key] = obj
    return out


def recall(ranked: Sequence[str], relevant: Iterable[str], k: int, kind: str) -> float:
    top = set(ranked[:k])
    rel = list(relevant)
    return float(any(r in top for r in rel)) if kind == "any" else float(all(r in top for r in rel))


def ndcg(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """LongMemEval's ``evaluate_retrieval`` NDCG: binary gains, DCG = rel_1 + sum_{i>=2} rel_i / log2(i)
    (its ``dcg`` with the first position undiscounted), ideal from min(k, relevant) ones."""
    gains = [1.0 if x in relevant else 0.0 for x in ranked[:k]]
    dcg = sum(g if i == 1 else g / math.log2(i) for i, g in enumerate(gains, start=1))
    ideal = sum(1.0 if i == 1 else 1.0 / math.log2(i) for i in range(1, min(k, len(relevant)) + 1))
    return dcg / ideal if ideal else 0.0


def mrr(ranked: Sequence[str], relevant: set[str]) -> float:
    return next((1.0 / i for i, x in enumerate(ranked, start=1) if x in relevant), 0.0)


class Truth:
    """Per question: the official relevant sessions and turns (None = skipped), the category, and the
    sessions a peer's script counts as answers."""

    def __init__(self) -> None:
        self.sessions: dict[str, set[str] | None] = {}
        self.turns: dict[str, set[str] | None] = {}
        self.category: dict[str, str] = {}
        self.peer_sessions: dict[str, set[str]] = {}


def longmemeval_truth(data: list[dict[str, Any]]) -> Truth:
    truth = Truth()
    for q in data:
        qid = q["question_id"]
        turns = set()
        for sid, session in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            for i, turn in enumerate(session, start=1):
                if turn.get("role") == "user" and turn.get("has_answer"):
                    turns.add(f"{sid}_{i}")
        skip = "_abs" in qid or not turns
        truth.turns[qid] = None if skip else turns
        truth.sessions[qid] = None if skip else {t.rsplit("_", 1)[0] for t in turns}
        truth.category[qid] = q["question_type"]
        truth.peer_sessions[qid] = set(q.get("answer_session_ids") or ())
    return truth


def locomo_truth(data: list[dict[str, Any]]) -> Truth:
    truth = Truth()
    for conv in data:
        c = conv["conversation"]
        known = {t["dia_id"] for key, turns in c.items() if re.fullmatch(r"session_\d+", key) for t in turns}
        sessions_known = {key for key in c if re.fullmatch(r"session_\d+", key)}
        for i, qa in enumerate(conv["qa"]):
            qid = f"{conv['sample_id']}:{i}"
            turns: list[str] = []
            sessions: list[str] = []
            for entry in qa.get("evidence") or ():
                for s, t in EVIDENCE.findall(str(entry)):
                    session = f"session_{int(s)}"
                    if session not in sessions_known:
                        continue
                    dia = f"D{int(s)}:{int(t)}"
                    if dia in known and dia not in turns:
                        turns.append(dia)
                    if session not in sessions:
                        sessions.append(session)
            truth.turns[qid] = set(turns) or None
            truth.sessions[qid] = set(sessions) or None
            truth.category[qid] = str(qa["category"])
            truth.peer_sessions[qid] = set(sessions)
    return truth


def official(truth: Truth, rankings: dict[str, dict[str, list[str]]], locomo: bool) -> dict[str, float]:
    """Means of session/turn recall_any/all@k over the scored questions (LoCoMo: categories 1-4)."""
    sums: dict[str, list[float]] = {}
    for qid, r in rankings.items():
        if locomo and truth.category[qid] not in ("1", "2", "3", "4"):
            continue
        levels = (("session", r["ranked_session_ids"], truth.sessions[qid]),)
        turn_key = "ranked_dia_ids" if locomo else "ranked_turn_ids"
        if r.get(turn_key):
            levels += (("turn", r[turn_key], truth.turns[qid]),)
        for level, ranked, relevant in levels:
            if not relevant:
                continue
            for k in KS:
                for kind in ("any", "all"):
                    sums.setdefault(f"{level}/recall_{kind}@{k}", []).append(recall(ranked, relevant, k, kind))
            for k in TOP_KS:
                sums.setdefault(f"{level}/recall_any@{k}", []).append(recall(ranked, relevant, k, "any"))
            sums.setdefault(f"{level}/ndcg_any@10", []).append(ndcg(ranked, relevant, 10))
            sums.setdefault(f"{level}/mrr", []).append(mrr(ranked, relevant))
    return {m: sum(v) / len(v) for m, v in sums.items()}


def peer_any(truth: Truth, rankings: dict[str, dict[str, list[str]]]) -> dict[str, float]:
    scores = {
        k: [
            recall(r["ranked_session_ids"], truth.peer_sessions[q], k, "any")
            for q, r in rankings.items()
            if truth.peer_sessions[q]
        ]
        for k in KS
    }
    n = len(next(iter(scores.values()))) if scores else 0
    return {f"session/recall_any@{k}": sum(v) / len(v) for k, v in scores.items() if v} | {"n": float(n)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = json.loads((args.run_dir / "results.json").read_text(encoding="utf-8"))
    dataset = results["config"]["dataset"]
    locomo = dataset == "locomo"
    data = load_json(args.data or default_data(dataset))
    truth = locomo_truth(data) if locomo else longmemeval_truth(data)
    headline = "overall (1-4)" if locomo else "overall"
    report: dict[str, Any] = {"dataset": dataset, "modes": {}}
    disagree = 0
    for mode, figures in results["modes"].items():
        rankings = read_rankings(args.run_dir / f"rankings.{mode}.jsonl")
        mine = official(truth, rankings, locomo)
        theirs = figures["groups"][headline]["means"]
        diffs = {
            m: (v, theirs.get(m)) for m, v in mine.items() if theirs.get(m) is None or abs(v - theirs[m]) > TOLERANCE
        }
        disagree += len(diffs)
        report["modes"][mode] = {"official": mine, "peer_any": peer_any(truth, rankings), "disagree": diffs}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        cols = [
            f"{lvl}/{m}"
            for lvl in ("session", "turn")
            for m in ("recall_any@1", "recall_any@3", "recall_all@5", "recall_all@10", "ndcg_any@10", "mrr")
        ]
        print(f"{dataset}: official figures re-scored from the rankings ({headline}); peer-any = engram's script")
        print("| mode | " + " | ".join(cols) + " | peer-any R@5 | peer-any R@10 | peer n | agrees |")
        for mode, r in report["modes"].items():
            cells = " | ".join(f"{r['official'][c]:.3f}" if c in r["official"] else "-" for c in cols)
            p = r["peer_any"]
            agrees = "yes" if not r["disagree"] else f"NO ({len(r['disagree'])})"
            peer = f"{p.get('session/recall_any@5', 0):.3f} | {p.get('session/recall_any@10', 0):.3f}"
            print(f"| {mode} | {cells} | {peer} | {int(p['n'])} | {agrees} |")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
