"""Retrieval metrics on hand-computed cases, plus a randomized check against an independent
re-implementation of the official LongMemEval procedure (renamed corpus ids, index rankings)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from memlane.bench.datasets.model import Sample
from memlane.bench.retrieval.metrics import (
    OVERALL,
    TASK_AVERAGE,
    aggregate,
    dcg,
    effective_k,
    move_audit,
    ndcg_any_at_k,
    recall_all_at_k,
    recall_any_at_k,
    recall_fraction_at_k,
    reciprocal_rank,
    score_locomo,
    score_longmemeval,
    turn_to_session_keys,
    turn_to_session_metrics,
)
from memlane.core.errors import ValidationError


def lme_sample(user_turns: tuple[str, ...], *, qid: str = "q1", abstention: bool = False) -> Sample:
    return Sample(
        sample_id=qid,
        namespace=qid,
        question="?",
        answer="!",
        category="multi-session",
        question_date=None,
        evidence_session_ids=tuple(dict.fromkeys(t.rsplit("_", 1)[0] for t in user_turns)),
        evidence_turn_ids=user_turns,
        user_evidence_turn_ids=user_turns,
        is_abstention=abstention,
    )


def test_dcg_official_discount() -> None:
    # Positions 1 and 2 both weigh 1 in the official formula; position 3 weighs 1/log2(3).
    assert dcg([1, 1, 1], 3) == pytest.approx(2 + 1 / math.log2(3))
    assert dcg([0, 1], 2) == pytest.approx(1.0)
    assert dcg([0, 0, 1, 1], 3) == pytest.approx(1 / math.log2(3))
    assert dcg([], 5) == 0.0


def test_recall_any_all() -> None:
    ranked = ["x", "a", "y", "b"]
    assert recall_any_at_k(ranked, {"a", "b"}, 1) == 0.0
    assert recall_any_at_k(ranked, {"a", "b"}, 2) == 1.0
    assert recall_all_at_k(ranked, {"a", "b"}, 3) == 0.0
    assert recall_all_at_k(ranked, {"a", "b"}, 4) == 1.0
    assert recall_fraction_at_k(ranked, {"a", "b"}, 2) == 0.5
    with pytest.raises(ValidationError):
        recall_any_at_k(ranked, {"a"}, 0)


def test_ndcg_hand_computed() -> None:
    ranked = ["x", "a", "y", "b"]
    # DCG = 0 + 1/log2(2) + 0 + 1/log2(4) = 1.5; ideal = 1 + 1 = 2.
    assert ndcg_any_at_k(ranked, {"a", "b"}, 4) == pytest.approx(0.75)
    # k = 2: DCG = 1, ideal = 2.
    assert ndcg_any_at_k(ranked, {"a", "b"}, 2) == pytest.approx(0.5)
    # Ideal from the corpus count: 3 relevant in the corpus, k = 4 -> ideal 2 + 1/log2(3).
    assert ndcg_any_at_k(ranked, {"a", "b"}, 4, n_relevant=3) == pytest.approx(1.5 / (2 + 1 / math.log2(3)))
    assert ndcg_any_at_k(ranked, set(), 4) == 0.0


def test_effective_k_hand_computed() -> None:
    keys = ["s1", "s1", "s2", "s1", "s3"]
    assert effective_k(keys, 1) == 1
    assert effective_k(keys, 2) == 3
    assert effective_k(keys, 3) == 5
    assert effective_k(keys, 4) == 6  # never reaches 4 sessions: the list length + 1, as the official loop
    assert effective_k(keys, 10) == 10  # k beyond the list is left alone


def test_turn_to_session_noans_keys() -> None:
    relevant = {"answer_a_3"}
    keys = turn_to_session_keys(["answer_a_1", "s_1_1", "answer_a_3", "s_2_5"], relevant)
    assert keys == ["noans:answer_a", "s_1", "answer_a", "s_2"]


def test_turn_to_session_expands_k() -> None:
    ranked = ["s1_1", "s1_3", "answer_a_1", "s2_1"]
    relevant = {"answer_a_1"}
    # k=2 needs 3 turns to see 2 distinct sessions, so the evidence at rank 3 counts.
    at2 = turn_to_session_metrics(ranked, relevant, 2)
    assert at2["recall_any@2"] == 1.0 and at2["recall_all@2"] == 1.0
    assert at2["ndcg_any@2"] == pytest.approx(1 / math.log2(3))
    at1 = turn_to_session_metrics(ranked, relevant, 1)
    assert at1 == {"recall_any@1": 0.0, "recall_all@1": 0.0, "ndcg_any@1": 0.0}


def test_non_evidence_turn_of_evidence_session_does_not_hit_the_session() -> None:
    ranked = ["answer_a_2", "answer_a_1"]
    relevant = {"answer_a_1"}
    at1 = turn_to_session_metrics(ranked, relevant, 1)
    assert at1["recall_any@1"] == 0.0  # answer_a_2 is an official "noans" key
    assert turn_to_session_metrics(ranked, relevant, 2)["recall_any@2"] == 1.0


def test_score_longmemeval_levels_and_skips() -> None:
    sample = lme_sample(("answer_a_1", "answer_b_3"))
    scores = score_longmemeval(
        sample,
        ["answer_a", "x", "answer_b"],
        ["answer_b_3", "x_1", "answer_a_1"],
        ks=(1, 3),
    )
    assert scores is not None
    assert scores["session/recall_any@1"] == 1.0 and scores["session/recall_all@1"] == 0.0
    assert scores["session/recall_all@3"] == 1.0
    assert scores["turn/recall_all@3"] == 1.0 and scores["turn/recall_all@1"] == 0.0
    assert scores["turn2session/recall_all@1"] == 0.0
    assert scores["turn/ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert score_longmemeval(lme_sample(("answer_a_1",), abstention=True), ["answer_a"], None) is None
    assert score_longmemeval(lme_sample(()), ["answer_a"], ["answer_a_1"]) is None
    only_turns = score_longmemeval(sample, None, ["x_1"], ks=(1,))
    assert only_turns is not None and not any(k.startswith("session/") for k in only_turns)
    with pytest.raises(ValidationError, match="duplicates"):
        score_longmemeval(sample, ["a", "a"], None)


# -- randomized comparison with the official procedure ------------------------------------------------


def _official_eval(
    rankings: list[int],
    correct: list[str],
    corpus_ids: list[str],
    k: int,
) -> tuple[float, ...]:
    top = {corpus_ids[i] for i in rankings[:k]}
    rels = [1.0 if cid in correct else 0.0 for cid in corpus_ids]
    got = [rels[i] for i in rankings[:k]]
    ideal = sorted(rels, reverse=True)
    ideal_dcg = dcg(ideal, k)
    ndcg = 0.0 if ideal_dcg == 0 else dcg(got, k) / ideal_dcg
    return float(any(c in top for c in correct)), float(all(c in top for c in correct)), ndcg


def _official_turn2session(
    rankings: list[int],
    correct: list[str],
    corpus_ids: list[str],
    k: int,
) -> tuple[float, ...]:
    strip = [cid.rsplit("_", 1)[0] for cid in corpus_ids]
    sessions = list({c.rsplit("_", 1)[0] for c in correct})
    eff = k
    while eff <= len(strip) and len({strip[i] for i in rankings[:eff]}) < k:
        eff += 1
    return _official_eval(rankings, sessions, strip, eff)


def _random_haystack(rng: random.Random) -> list[tuple[str, list[tuple[str, bool]]]]:
    sessions = []
    for j in range(rng.randint(2, 7)):
        evidence = rng.random() < 0.4
        sid = f"answer_{j}x_{j}" if evidence else f"sharegpt_{j}_0"
        turns = []
        for _ in range(rng.randint(1, 6)):
            turns.append((rng.choice(["user", "assistant"]), evidence and rng.random() < 0.4))
        sessions.append((sid, turns))
    return sessions


@pytest.mark.parametrize("seed", range(40))
def test_matches_official_procedure(seed: int) -> None:
    rng = random.Random(seed)
    haystack = _random_haystack(rng)
    turn_ids, corpus_ids, relevant = [], [], []
    for sid, turns in haystack:
        for i, (role, has_answer) in enumerate(turns):
            if role != "user":
                continue
            tid = f"{sid}_{i + 1}"
            turn_ids.append(tid)
            corpus_ids.append(tid if "answer" not in sid or has_answer else tid.replace("answer", "noans"))
            if has_answer:
                relevant.append(tid)
    session_ids = [sid for sid, _ in haystack]
    with_user_evidence = {r.rsplit("_", 1)[0] for r in relevant}
    # Official session corpus: an answer_ session without a user has_answer turn is renamed noans_.
    session_corpus = [s if s in with_user_evidence else s.replace("answer", "noans") for s in session_ids]
    sample = lme_sample(tuple(relevant))
    turn_perm = rng.sample(range(len(turn_ids)), len(turn_ids))
    session_perm = rng.sample(range(len(session_ids)), len(session_ids))
    ks = (1, 2, 3, 5, 10)
    ours = score_longmemeval(
        sample,
        [session_ids[i] for i in session_perm],
        [turn_ids[i] for i in turn_perm],
        ks,
    )
    if not relevant:
        assert ours is None
        return
    assert ours is not None
    turn_correct = [c for c in corpus_ids if "answer" in c]
    session_correct = [c for c in session_corpus if "answer" in c]
    for k in ks:
        expected = {
            "turn": _official_eval(turn_perm, turn_correct, corpus_ids, k),
            "turn2session": _official_turn2session(turn_perm, turn_correct, corpus_ids, k),
            "session": _official_eval(session_perm, session_correct, session_corpus, k),
        }
        for level, (r_any, r_all, ndcg) in expected.items():
            assert ours[f"{level}/recall_any@{k}"] == r_any, (level, k)
            assert ours[f"{level}/recall_all@{k}"] == r_all, (level, k)
            assert ours[f"{level}/ndcg_any@{k}"] == pytest.approx(ndcg), (level, k)


# -- LoCoMo ---------------------------------------------------------------------------------------------


def locomo_sample(turns: tuple[str, ...], sessions: tuple[str, ...], category: int = 1) -> Sample:
    return Sample(
        sample_id="conv-x:0",
        namespace="conv-x",
        question="?",
        answer="!",
        category="multi-hop",
        question_date=None,
        evidence_session_ids=sessions,
        evidence_turn_ids=turns,
        user_evidence_turn_ids=turns,
        is_abstention=category == 5,
        category_number=category,
    )


def test_locomo_turn_and_session_recall() -> None:
    sample = locomo_sample(("D1:3", "D4:2"), ("session_1", "session_4"))
    scores = score_locomo(
        sample,
        ["D4:2", "D2:1", "D1:3"],
        ["session_4", "session_2", "session_1"],
        ks=(1, 2, 3),
    )
    assert scores is not None
    assert scores["turn/recall_any@1"] == 1.0 and scores["turn/recall_all@1"] == 0.0
    assert scores["turn/recall@2"] == 0.5 and scores["turn/recall_all@3"] == 1.0
    assert scores["session/recall_all@2"] == 0.0 and scores["session/recall_all@3"] == 1.0


def test_locomo_empty_evidence_policy() -> None:
    empty = locomo_sample((), ())
    assert score_locomo(empty, ["D1:1"], ["session_1"], ks=(1,)) is None
    official = score_locomo(empty, ["D1:1"], ["session_1"], ks=(1,), on_empty="one")
    assert official == {
        "turn/recall_all@1": 1.0,
        "turn/recall_any@1": 1.0,
        "turn/recall@1": 1.0,
        "session/recall_all@1": 1.0,
        "session/recall_any@1": 1.0,
        "session/recall@1": 1.0,
    }
    # Dangling evidence id kept at session level only: the session level is still scored.
    dangling = locomo_sample((), ("session_10",))
    scores = score_locomo(dangling, ["D1:1"], ["session_10"], ks=(1,))
    assert scores == {
        "session/recall_all@1": 1.0,
        "session/recall_any@1": 1.0,
        "session/recall@1": 1.0,
        "session/ndcg_any@1": 1.0,
        "session/mrr": 1.0,
    }


def test_the_top_of_the_ranking_mrr_and_locomo_ndcg() -> None:
    assert reciprocal_rank(["a", "b", "c"], {"c"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a", "b"], {"z"}) == 0.0
    sample = locomo_sample(("D1:3", "D4:2"), ("session_1", "session_4"))
    scores = score_locomo(sample, ["D2:1", "D4:2", "D1:3"], ["session_2", "session_1", "session_4"], ks=(3,))
    assert scores is not None
    assert scores["turn/mrr"] == 0.5 and scores["session/mrr"] == 0.5
    # LongMemEval's formula: positions 1 and 2 weigh 1, position 3 1 / log2(3); ideal = two at the top
    assert scores["turn/ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    lme = score_longmemeval(lme_sample(("answer_a_1",)), ["x", "answer_a"], ["x_1", "answer_a_1"], ks=(1,))
    assert lme is not None and lme["session/mrr"] == 0.5 and lme["turn/mrr"] == 0.5


def test_move_audit_counts_harmful_and_helpful_moves() -> None:
    evidence = {"e1", "e2"}
    # n moved above e1 (harmful); e2 moved above x (helpful); e1 passed by e2? no: e2 passes x only
    before = ["e1", "x", "n", "e2", "y"]
    after = ["n", "e1", "e2", "x", "y"]
    assert move_audit(before, after, evidence) == {"moves": 2.0, "moves_harmful": 1.0, "moves_helpful": 1.0}
    assert move_audit(before, before, evidence) == {"moves": 0.0, "moves_harmful": 0.0, "moves_helpful": 0.0}
    # evidence passing evidence, non-evidence passing non-evidence: moves, neither harmful nor helpful
    assert move_audit(["e1", "e2", "x", "y"], ["e2", "e1", "y", "x"], evidence) == {
        "moves": 2.0,
        "moves_harmful": 0.0,
        "moves_helpful": 0.0,
    }


def test_locomo_rejects_duplicates() -> None:
    with pytest.raises(ValidationError, match="conv-x:0: ranked_dia_ids"):
        score_locomo(locomo_sample(("D1:1",), ("session_1",)), ["D1:1", "D1:1"], None)


# -- aggregation ----------------------------------------------------------------------------------------


def test_aggregate_per_category_overall_and_task_average() -> None:
    result = aggregate(
        [
            ("temporal", {"r@1": 1.0, "r@5": 1.0}),
            ("temporal", {"r@1": 0.0, "r@5": 1.0}),
            ("temporal", None),
            ("multi-session", {"r@1": 1.0}),
        ]
    )
    assert list(result) == ["temporal", "multi-session", OVERALL, TASK_AVERAGE]
    assert result["temporal"].means == {"r@1": 0.5, "r@5": 1.0}
    assert (result["temporal"].n, result["temporal"].skipped) == (2, 1)
    assert result[OVERALL].means["r@1"] == pytest.approx(2 / 3)
    assert result[OVERALL].counts == {"r@1": 3, "r@5": 2}
    assert result[OVERALL].skipped == 1
    assert result[TASK_AVERAGE].means["r@1"] == pytest.approx(0.75)
    assert result[TASK_AVERAGE].n == 2


def test_aggregate_category_with_only_skipped() -> None:
    result = aggregate([("abs", None), ("x", {"m": 0.25})])
    assert result["abs"].n == 0 and result["abs"].means == {}
    assert result[TASK_AVERAGE].means == {"m": 0.25}


def test_session_ranking_only() -> None:
    base = lme_sample(("answer_a_1",))
    assert score_longmemeval(base, ["answer_a"], None, ks=(1,)) == {
        "session/recall_any@1": 1.0,
        "session/recall_all@1": 1.0,
        "session/ndcg_any@1": 1.0,
        "session/mrr": 1.0,
    }
    assert score_longmemeval(replace(base, user_evidence_turn_ids=()), ["answer_a"], None) is None
