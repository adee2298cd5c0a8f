"""Documented counts of the real data sets: LoCoMo (shipped) always; LongMemEval with MEMLANE_DATA."""

from __future__ import annotations

from collections import Counter

import pytest
from bench_synth import real_data_dir

from memlane.bench.datasets.expansion import expand_haystacks
from memlane.bench.datasets.registry import load_dataset
from memlane.bench.retrieval.metrics import aggregate, score_locomo, score_longmemeval

# From the data sets' READMEs.
LOCOMO_SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
ORACLE_SHA256 = "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c"
# The partial S file's content, decompressed (its .xz bytes hash to 3ae6b60e...).
S_SHA256 = "48351ae4a5d965880de574a8a6ed975ecfd73a40725a42e70713842d2995595a"
TYPE_COUNTS = {
    "single-session-user": 70,
    "single-session-assistant": 56,
    "single-session-preference": 30,
    "multi-session": 133,
    "knowledge-update": 78,
    "temporal-reasoning": 133,
}


def test_locomo_counts() -> None:
    ds = load_dataset("locomo")
    assert ds.sha256 == LOCOMO_SHA256
    assert len(ds.histories) == 10
    assert len(ds.samples) == 1986
    assert Counter(s.category_number for s in ds.samples) == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    assert sum(s.category_number != 5 for s in ds.samples) == 1540
    assert sum(len(v) for v in ds.histories.values()) == 272
    assert sum(len(s.turns) for v in ds.histories.values() for s in v) == 5882
    assert len(ds.histories["conv-26"]) == 19
    assert all(s.answer for s in ds.samples)
    assert sum(s.is_abstention for s in ds.samples) == 446
    assert sum(1 for s in ds.samples if s.category_number == 5 and s.answer == "No") >= 2
    # 4 category-3 items have empty evidence; one item's only bad entry was "D".
    assert sum(1 for s in ds.samples if not s.raw_evidence) == 4
    assert "D11:26" in next(s for s in ds.samples if s.sample_id == "conv-43:18").evidence_turn_ids
    # Perfect rankings score 1 wherever evidence exists.
    scored = []
    for s in ds.samples:
        sessions = [x.session_id for x in ds.histories[s.namespace]]
        rest = [x for x in sessions if x not in s.evidence_session_ids]
        ranked_sessions = list(s.evidence_session_ids) + rest
        scored.append((s.category, score_locomo(s, list(s.evidence_turn_ids), ranked_sessions, ks=(50,))))
    overall = aggregate(scored)["overall"]
    assert overall.skipped == 4
    assert overall.means["turn/recall_all@50"] == 1.0 and overall.means["session/recall_all@50"] == 1.0


@pytest.mark.realdata
def test_longmemeval_oracle_counts() -> None:
    data_dir = real_data_dir("longmemeval-oracle")
    ds = load_dataset("longmemeval-oracle", data_dir)
    assert ds.sha256 == ORACLE_SHA256
    assert len(ds.samples) == 500
    assert Counter(s.category for s in ds.samples) == TYPE_COUNTS
    assert sum(s.is_abstention for s in ds.samples) == 30
    assert sum(len(v) for v in ds.histories.values()) == 948
    turns = [t for v in ds.histories.values() for s in v for t in s.turns]
    assert len(turns) == 10960
    assert sum(bool(t.has_answer) for t in turns) == 896
    assert all(t.has_answer is not None for t in turns)
    perfect = [
        (
            s.category,
            score_longmemeval(
                s,
                _sessions_of(s.user_evidence_turn_ids),
                list(s.user_evidence_turn_ids),
                ks=(10,),
            ),
        )
        for s in ds.samples
    ]
    overall = aggregate(perfect)["overall"]
    # Official skips: the 30 abstention questions and 51 others without a user turn marked has_answer.
    assert (overall.n, overall.skipped) == (419, 81)
    assert overall.means["session/recall_all@10"] == 1.0


@pytest.mark.slow
@pytest.mark.realdata
def test_longmemeval_s_counts_and_x500() -> None:
    data_dir = real_data_dir("longmemeval-s")
    s_ds = load_dataset("longmemeval-s", data_dir)
    assert s_ds.sha256 == S_SHA256
    assert len(s_ds.samples) == 499
    assert "gpt4_7a0daae1" not in s_ds.histories
    expected = dict(TYPE_COUNTS, **{"temporal-reasoning": 132})
    assert Counter(s.category for s in s_ds.samples) == expected
    assert sum(s.is_abstention for s in s_ds.samples) == 30
    sizes = [len(v) for v in s_ds.histories.values()]
    assert min(sizes) >= 37 and max(sizes) <= 62
    sessions = {s.session_id for v in s_ds.histories.values() for s in v}
    assert len(sessions) == 19167
    assert len({e for s in s_ds.samples for e in s.evidence_session_ids}) == 938
    flagged = [t for v in s_ds.histories.values() for s in v for t in s.turns if t.has_answer is not None]
    assert sum(1 for t in flagged if t.has_answer) == 894
    assert sum("re-ordered" in n for n in s_ds.notes) == 210

    base = list(s_ds.haystacks())
    grown = list(expand_haystacks(base, size=500, seed=0))
    assert [len(h.sessions) for h in grown] == [500] * 499
    evidence = {e for h in base for s in h.samples for e in s.evidence_session_ids}
    for before, after in zip(base, grown, strict=True):
        own = {s.session_id for s in before.sessions}
        ids = [s.session_id for s in after.sessions]
        assert len(set(ids)) == 500
        added = set(ids) - own
        assert not any(a.startswith("answer_") or a in evidence for a in added)


def _sessions_of(turn_ids: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(t.rsplit("_", 1)[0] for t in turn_ids))
