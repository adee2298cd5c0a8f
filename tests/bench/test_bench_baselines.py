"""Baseline retrievers (``memlane.bench.retrieval.baselines``) and ``memlane bench baselines``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from bench_runs import make_data_dir
from bench_runs import options as bench_options
from click.testing import CliRunner

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL
from memlane.bench.datasets.model import Haystack, Sample, Session, Turn
from memlane.bench.reports.results import load_results
from memlane.bench.retrieval.baselines import (
    BASELINES,
    BaselineOptions,
    HaystackRanker,
    TermCache,
    evaluate_baseline,
    rankings_of,
    resolve_baselines,
    rrf,
    run_baselines,
    session_units,
)
from memlane.bench.retrieval.bm25 import Vocabulary, bm25_scores, tokenize
from memlane.bench.retrieval.history import HaystackIndex
from memlane.bench.retrieval.rankings import read_rankings
from memlane.bench.retrieval.run import run_retrieval
from memlane.bench.retrieval.runlog import QuestionRecord, RetrievalConfig, read_log
from memlane.bench.split import question_split
from memlane.core.embedding.protocol import CachedEmbedder, Vectors, make_embedder
from memlane.core.errors import ConfigError
from memlane.core.retrieval import PRESETS
from memlane.interfaces.cli.app import cli, register_all

register_all()


def test_tokenize_lower_cases_words() -> None:
    assert tokenize("Luna's NEW cat-tree, 2 m!") == ["luna", "s", "new", "cat", "tree", "2", "m"]


def test_bm25_matches_a_hand_computed_example() -> None:
    # N = 4, avgdl = 2. df(a) = 1: idf = ln(3.5 / 1.5); df(b) = df(c) = df(d) = 2: idf = ln(2.5 / 2.5) = 0.
    docs = [["a", "b", "a"], ["b", "c"], ["c", "d"], ["d"]]
    scores = bm25_scores(docs, ["a", "b"])
    idf_a = math.log(3.5 / 1.5)
    # d1: tf(a) = 2, |d1| = 3: 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 2)) = 5 / 4.0625.
    expected_d1 = idf_a * 5 / 4.0625
    assert scores[0] == pytest.approx(expected_d1)
    assert scores[0] == pytest.approx(1.0428282, abs=1e-6)
    assert list(scores[1:]) == [0.0, 0.0, 0.0]
    # Each occurrence of a query term counts (rank_bm25 loops over the query tokens); unknown terms add 0.
    assert bm25_scores(docs, ["a", "a", "zzz"])[0] == pytest.approx(2 * expected_d1)


def test_bm25_floors_negative_idf_like_rank_bm25() -> None:
    # x is in 3 of 4 documents: idf = ln(1.5 / 3.5) < 0, replaced by 0.25 * mean idf over the vocabulary
    # (x, y, z, w, v), whose other four idfs are ln(3.5 / 1.5).
    docs = [["x", "y"], ["x", "z"], ["x", "w"], ["v"]]
    raw = [math.log(1.5 / 3.5)] + [math.log(3.5 / 1.5)] * 4
    floor = 0.25 * sum(raw) / len(raw)
    avgdl = 7 / 4
    expected = floor * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / avgdl))
    scores = bm25_scores(docs, ["x"])
    assert scores[:3] == pytest.approx([expected] * 3)
    assert expected == pytest.approx(0.119418, abs=1e-6)
    assert scores[3] == 0.0


def test_bm25_parameters_and_empty_inputs() -> None:
    docs = [["a", "b"], ["b", "b", "b", "c"], ["d"], ["e"], ["f"]]
    # b = 0: no length normalisation, so tf alone decides among documents holding b.
    s = bm25_scores(docs, ["b"], b=0.0, epsilon=1.0)
    assert s[1] > s[0] > 0
    assert list(bm25_scores([], ["a"])) == []
    assert list(bm25_scores([[], []], ["a"])) == [0.0, 0.0]
    assert list(bm25_scores(docs, [])) == [0.0] * 5


def test_rrf_fuses_reciprocal_ranks() -> None:
    fused = rrf([["a", "b"], ["b", "c"]], k=60)
    assert [i for i, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    # Ties keep the given (haystack) order.
    assert [i for i, _ in rrf([["x"], ["y"]], order=["y", "x"])] == ["y", "x"]


def _t(sid: str, i: int, role: str, content: str, has_answer: bool | None = None) -> Turn:
    return Turn(f"{sid}_{i}", role, content, has_answer)


def _haystack() -> Haystack:
    day = datetime(2023, 5, 1, tzinfo=UTC)
    sessions = (
        Session(
            "s_pets",
            day,
            (
                _t("s_pets", 1, "user", "I adopted a cat and named her Luna.", True),
                _t("s_pets", 2, "assistant", "Luna is a lovely name for a cat!", False),
            ),
        ),
        Session(
            "s_cars",
            day,
            (_t("s_cars", 1, "user", "The car is red."), _t("s_cars", 2, "assistant", "Red cars are fast.")),
        ),
        Session(
            "s_tea",
            day,
            (
                _t("s_tea", 1, "assistant", "Welcome back! Your cat misses you."),
                _t("s_tea", 2, "user", "Green tea, please."),
                _t("s_tea", 3, "assistant", "Green tea is great."),
                _t("s_tea", 4, "user", "And oolong."),
            ),
        ),
    )
    sample = Sample(
        sample_id="q1",
        namespace="q1",
        question="What did I name my cat?",
        answer="Luna",
        category="single-session-user",
        question_date=day,
        evidence_session_ids=("s_pets",),
        evidence_turn_ids=("s_pets_1",),
        user_evidence_turn_ids=("s_pets_1",),
        is_abstention=False,
    )
    return Haystack("q1", sessions, (sample,))


def test_units_of_a_session() -> None:
    tea = _haystack().sessions[2]
    rounds = session_units(tea, LONGMEMEVAL, "round")
    # The leading assistant turn opens no round; a round is a user turn plus the replies after it.
    assert [(u.unit_id, u.turn_ids, u.text) for u in rounds] == [
        ("s_tea_2", ("s_tea_2",), "Green tea, please.\nGreen tea is great."),
        ("s_tea_4", ("s_tea_4",), "And oolong."),
    ]
    (whole,) = session_units(tea, LONGMEMEVAL, "session")
    assert whole.text.startswith("Welcome back!") and whole.turn_ids == ("s_tea_2", "s_tea_4")
    (users,) = session_units(tea, LONGMEMEVAL, "session", "targets")
    assert users.text == "Green tea, please.\nAnd oolong."
    assert [u.unit_id for u in session_units(tea, LONGMEMEVAL, "turn")] == ["s_tea_2", "s_tea_4"]
    with pytest.raises(ConfigError, match="rounds"):
        session_units(tea, LOCOMO, "round")


class _DictCache:
    def __init__(self) -> None:
        self.data: dict[str, Vectors] = {}

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        return {h: self.data[h] for h in hashes if h in self.data}

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None:
        self.data.update(items)


def _config(modes: tuple[str, ...], min_length: int = 50) -> RetrievalConfig:
    return RetrievalConfig(
        dataset="longmemeval-s",
        modes=modes,
        ks=(1, 3, 5),
        limit=None,
        depth=min_length,
        min_length=min_length,
        before_question_date=False,
        perspective="none",
        embedder="hashing",
        embedder_model_id="hashing-64",
    )


def test_ranking_a_tiny_haystack() -> None:
    haystack = _haystack()
    (sample,) = haystack.samples
    index = HaystackIndex.of(haystack, LONGMEMEVAL)
    embedder = CachedEmbedder(make_embedder("hashing"), _DictCache())
    ranker = HaystackRanker(haystack, LONGMEMEVAL, TermCache(Vocabulary()), embedder)
    config = _config(tuple(BASELINES))

    bm25 = evaluate_baseline(ranker, sample, index, BASELINES["bm25-sessions"], config)
    # "cat" is in s_pets (twice) and in s_tea's opening assistant turn; s_cars shares no word: padding.
    assert bm25.ranked_session_ids == ("s_pets", "s_tea", "s_cars")
    assert bm25.retrieved_sessions == 2
    assert bm25.ranked_turn_ids == () and bm25.retrieved_turns == 0
    assert bm25.scores is not None
    assert bm25.scores["session/recall_all@1"] == 1.0
    assert not any(k.startswith("turn") for k in bm25.scores)  # session baselines rank no turns
    assert [h[0] for h in bm25.hits] == ["s_pets", "s_tea"]

    # Only user turns are targets, so the user-text variant no longer sees s_tea's "cat".
    user = evaluate_baseline(ranker, sample, index, BASELINES["bm25-sessions-user"], config)
    assert user.ranked_session_ids[0] == "s_pets" and user.retrieved_sessions == 1

    rounds = evaluate_baseline(ranker, sample, index, BASELINES["bm25-rounds"], config)
    assert rounds.ranked_turn_ids[0] == "s_pets_1"
    # Padded with the remaining user turns in haystack order (assistant turns are not targets).
    assert rounds.ranked_turn_ids == ("s_pets_1", "s_cars_1", "s_tea_2", "s_tea_4")
    assert rounds.ranked_session_ids == ("s_pets", "s_cars", "s_tea")
    assert rounds.retrieved_turns == 1 and rounds.scores is not None
    assert rounds.scores["turn/recall_all@1"] == 1.0

    vector = evaluate_baseline(ranker, sample, index, BASELINES["minilm-sessions"], config)
    assert sorted(vector.ranked_session_ids) == ["s_cars", "s_pets", "s_tea"] and vector.retrieved_sessions == 3
    fused = evaluate_baseline(ranker, sample, index, BASELINES["rrf-sessions"], config)
    expected = [i for i, _ in rrf([bm25.ranked_session_ids[:2], vector.ranked_session_ids], order=index.session_ids)]
    assert list(fused.ranked_session_ids) == expected
    assert set(fused.latency_ms) == {"index", "search", "rank_and_score", "total"}


def test_rankings_are_cut_and_padded_to_min_length() -> None:
    haystack = _haystack()
    index = HaystackIndex.of(haystack, LONGMEMEVAL)
    ranker = HaystackRanker(haystack, LONGMEMEVAL, TermCache(Vocabulary()))
    ranking = ranker.rank(BASELINES["bm25-rounds"], "green tea and oolong, my red car")
    units = ranker.units("round")
    out = rankings_of(ranking, units, index, "round", min_length=2)
    assert len(out.turn_ids or ()) == 2 and len(out.session_ids) == 2
    assert out.retrieved_turns == 2 and out.retrieved_sessions == 2
    assert np.all(np.diff(ranking.scores) <= 0)


def test_term_cache_reuses_a_session_only_with_the_same_content() -> None:
    cache = TermCache(Vocabulary())
    session = _haystack().sessions[0]
    first = cache.units(session, LONGMEMEVAL, "session", "all")
    assert cache.units(session, LONGMEMEVAL, "session", "all") is first
    changed = Session(session.session_id, session.started_at, session.turns[:1])
    assert cache.units(changed, LONGMEMEVAL, "session", "all") is not first
    assert (cache.hits, cache.misses) == (1, 2)


def test_resolve_baselines() -> None:
    names = [b.name for b in resolve_baselines(BaselineOptions("longmemeval-s"))]
    assert names == list(BASELINES)  # LongMemEval: every baseline (the -user ones reproduce the table)
    assert [b.name for b in resolve_baselines(BaselineOptions("locomo"))][-1] == "bm25-turns"
    with pytest.raises(ConfigError, match="does not apply"):
        resolve_baselines(BaselineOptions("locomo", baselines=("bm25-rounds",)))
    with pytest.raises(ConfigError, match="unknown baseline"):
        resolve_baselines(BaselineOptions("locomo", baselines=("tfidf",)))


def test_run_folder_is_a_standard_retrieval_run(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    options = BaselineOptions(
        "longmemeval-s",
        embedder="hashing",
        ks=(1, 3, 5, 10, 50),
        data_dir=tmp_path / "data",
        cache_dir=tmp_path / "cache",
    )
    run = tmp_path / "run"
    outcome = run_baselines(options, run, progress=False)
    assert outcome.written == 10 * 8 and outcome.texts_embedded > 0
    assert (tmp_path / "cache" / "embeddings.db").is_file()
    results = load_results(run)
    assert list(results.modes) == list(BASELINES)
    header = read_log(run / "log.jsonl").header
    assert header.config.perspective == "none" and header.config.embedder_model_id == "hashing-64"
    assert header.config.search_settings["bm25-sessions"]["k1"] == 1.5
    overall = results.modes["bm25-rounds"].groups["overall"]
    assert overall.n == 9 and overall.skipped == 1  # synth0009_abs is an abstention
    assert "turn/recall_all@10" in overall.means and "session/recall_all@5" in overall.means
    assert "turn/recall_all@10" not in results.modes["rrf-sessions"].groups["overall"].means
    # The synthetic evidence ("fact for <id>") is found by keyword search.
    assert results.modes["bm25-sessions"].groups["overall"].means["session/recall_all@5"] == 1.0
    for name in ("report.md", "results.json", "results.csv", "recall.png", "rankings.jsonl"):
        assert (run / name).is_file()
    rankings = read_rankings(run / "rankings.bm25-rounds.jsonl")
    assert len(rankings) == 10
    assert "| bm25-sessions |" in (run / "report.md").read_text(encoding="utf-8")

    # A rerun resumes: nothing left to do, and the embedding cache is warm.
    again = run_baselines(options, run, progress=False)
    assert again.written == 0 and again.already_logged == 80


def test_locomo_turn_baseline(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    options = BaselineOptions(
        "locomo", baselines=("bm25-turns",), data_dir=tmp_path / "data", cache_dir=tmp_path / "cache"
    )
    run = tmp_path / "run"
    run_baselines(options, run, progress=False)
    results = load_results(run)
    header = read_log(run / "log.jsonl").header
    assert header.config.embedder == "none"  # no cosine baseline: no embedder is built
    group = results.modes["bm25-turns"].groups["overall (1-4)"]
    assert group.n > 0 and "turn/recall_all@10" in group.means and "session/recall_all@10" in group.means


def test_cli_baselines_report_and_compare(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    env = {
        "MEMLANE_DATA": str(tmp_path / "data"),
        "MEMLANE_BENCH_CACHE": str(tmp_path / "cache"),
        "MEMLANE_BENCH_QUIET": "1",
    }
    run = tmp_path / "run"
    runner = CliRunner()
    args = ["bench", "baselines", "longmemeval-s", "--out", str(run), "--limit", "3", "--embedder", "hashing"]
    res = runner.invoke(cli, args, env=env)
    assert res.exit_code == 0, res.stderr
    assert "longmemeval-s: baselines side by side" in res.stdout
    assert "| bm25-rounds |" in res.stdout and "longmemeval-s, rrf-sessions:" in res.stdout
    assert "24 records written" in res.stderr

    res = runner.invoke(cli, ["bench", "report", str(run)], env=env)
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(cli, ["bench", "compare", str(run), str(run), "--categories"], env=env)
    assert res.exit_code == 0, res.stderr
    assert "| bm25-sessions | overall | session R_all@10 |" in res.stdout

    res = runner.invoke(cli, [*args[:4], str(tmp_path / "r2"), "--baselines", "bm25-rounds,nope"], env=env)
    assert res.exit_code == 2 and "unknown baseline 'nope'" in res.stderr
    res = runner.invoke(
        cli, ["bench", "baselines", "locomo", "--out", str(tmp_path / "r3"), "--baselines", "bm25-rounds"], env=env
    )
    assert res.exit_code == 1 and "does not apply" in res.stderr


def test_baselines_in_a_retrieval_run_match_a_baseline_run(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    names = ("bm25-rounds", "rrf-sessions")
    run = tmp_path / "both"
    run_retrieval(bench_options(tmp_path, modes=("keyword",), baselines=names), run)
    alone = tmp_path / "alone"
    run_baselines(
        BaselineOptions(
            "longmemeval-s",
            baselines=names,
            embedder="hashing",
            ks=(1, 3, 5, 10, 50),
            data_dir=tmp_path / "data",
            cache_dir=tmp_path / "cache",
        ),
        alone,
        progress=False,
    )
    log = read_log(run / "log.jsonl")
    assert log.header.config.modes == ("keyword", *names)
    assert log.header.config.search_settings["bm25-rounds"]["k1"] == 1.5
    by_mode: dict[str, dict[str, QuestionRecord]] = {}
    for r in log.records:
        by_mode.setdefault(r.mode, {})[r.sample.sample_id] = r
    assert {m: len(v) for m, v in by_mode.items()} == {"keyword": 10, "bm25-rounds": 10, "rrf-sessions": 10}
    reference = {(r.mode, r.sample.sample_id): r for r in read_log(alone / "log.jsonl").records}
    for name in names:
        for qid, record in by_mode[name].items():
            assert record.split == question_split(qid)
            assert record.split == reference[(name, qid)].split  # the standalone run logs the split too
            assert record.ranked_session_ids == reference[(name, qid)].ranked_session_ids
            assert record.scores == reference[(name, qid)].scores
    results = load_results(run)
    assert list(results.modes) == ["keyword", *names]
    assert "| bm25-rounds |" in (run / "report.md").read_text(encoding="utf-8")


def test_retrieval_run_rejects_bad_baselines(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    with pytest.raises(ConfigError, match="does not apply"):
        run_retrieval(bench_options(tmp_path, dataset="locomo", baselines=("bm25-rounds",)), tmp_path / "r1")
    with pytest.raises(ConfigError, match="unknown baseline"):
        run_retrieval(bench_options(tmp_path, baselines=("tfidf",)), tmp_path / "r2")
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_baseline_and_preset_names_are_disjoint() -> None:
    # A retrieval run logs presets and baselines side by side as modes, keyed by name.
    assert not set(PRESETS) & set(BASELINES)
