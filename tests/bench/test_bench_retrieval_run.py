"""A retrieval run end to end on synthetic data: rankings in the contract format, log, resume, reports."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest
from bench_runs import make_data_dir, options

from memlane.bench.datasets.registry import load_dataset
from memlane.bench.reports.compare import format_compare
from memlane.bench.reports.report import write_reports
from memlane.bench.reports.results import load_results, per_question
from memlane.bench.retrieval import run as retrieval_run
from memlane.bench.retrieval.rankings import LocomoRanking, LongMemEvalRanking, read_rankings
from memlane.bench.retrieval.run import run_retrieval
from memlane.bench.retrieval.runlog import LOG_NAME, read_log, unpack_log
from memlane.core.errors import ConfigError

REPORT_FILES = ("report.md", "results.json", "results.csv", "recall.png", "rankings.jsonl")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    make_data_dir(tmp_path)
    return tmp_path


def test_longmemeval_run_writes_contract_rankings_and_reports(root: Path) -> None:
    out = root / "run"
    outcome = run_retrieval(options(root), out, progress=False)
    assert (outcome.written, outcome.already_logged, outcome.errors) == (30, 0, 0)
    for name in (*REPORT_FILES, "rankings.vector.jsonl", "rankings.keyword.jsonl", "rankings.hybrid.jsonl"):
        assert (out / name).is_file(), name
    ds = load_dataset("longmemeval-s", root / "data")
    rankings = read_rankings(out / "rankings.jsonl")  # the contract's own validating reader
    assert set(rankings) == {s.sample_id for s in ds.samples}
    for sample in ds.samples:
        r = rankings[sample.sample_id]
        assert isinstance(r, LongMemEvalRanking)
        sessions = [s.session_id for s in ds.histories[sample.namespace]]
        user_turns = [t.turn_id for s in ds.histories[sample.namespace] for t in s.turns if t.role == "user"]
        assert len(r.ranked_session_ids) >= min(50, len(sessions))
        assert len(r.ranked_turn_ids) >= min(50, len(user_turns))
        assert set(r.ranked_session_ids) <= set(sessions)
        assert set(r.ranked_turn_ids) <= set(user_turns)  # official turn corpus: user turns only
    # The synthetic questions quote their evidence, so keyword search finds it.
    results = json.loads((out / "results.json").read_text())
    overall = results["modes"]["keyword"]["groups"]["overall"]
    assert overall["means"]["session/recall_any@5"] == 1.0
    assert overall["skipped"] == 1  # the abstention question
    assert "| hybrid |" in (out / "report.md").read_text()


def test_reports_pair_every_mode_with_the_headline_mode_question_by_question(root: Path) -> None:
    out = root / "run"
    run_retrieval(options(root), out, progress=False)
    unpack_log(out / LOG_NAME)
    # Every mode finds everything in these small haystacks; make hybrid miss two test questions at @5.
    lines = (out / LOG_NAME).read_text().splitlines()
    lowered: list[str] = []
    for i, line in enumerate(lines):
        rec = json.loads(line)
        hybrid_test = rec.get("type") == "question" and rec["mode"] == "hybrid" and rec["split"] == "test"
        if hybrid_test and rec["scores"] and len(lowered) < 2 and rec["scores"]["session/recall_all@5"] == 1.0:
            rec["scores"]["session/recall_all@5"] = 0.0
            lowered.append(rec["sample"]["sample_id"])
            lines[i] = json.dumps(rec)
    assert len(lowered) == 2
    (out / LOG_NAME).write_text("\n".join(lines) + "\n")
    write_reports(out)
    results = load_results(out)
    paired = json.loads((out / "results.json").read_text())["paired"]
    assert paired["against"] == "hybrid" and set(paired["splits"]) == {"dev", "test"}
    for split, modes in paired["splits"].items():
        assert set(modes) == {"vector", "keyword"}
        n = sum(r.mode == "hybrid" and r.split == split and r.scores is not None for r in results.contents.records)
        for diff in (metrics["session/recall_all@5"] for metrics in modes.values()):
            better = 2 if split == "test" else 0
            assert (diff["n"], diff["better"], diff["worse"]) == (n, better, 0)
            assert diff["mean"] == pytest.approx(better / n)
            assert diff["low"] <= diff["mean"] <= diff["high"]
            assert diff["p"] == pytest.approx(0.5 if better else 1.0)  # 2 to 0: 2 * (1/2)^2
    report = (out / "report.md").read_text()
    assert report.count("| mode - hybrid | session R_all@5 | session R_all@10 | turn R_all@10 |") == 3
    assert "| vector | +0.333 [" in report  # the test split: 2 of its 6 scored questions


def test_locomo_run_uses_qa_ids_and_dia_ids(root: Path) -> None:
    out = root / "run"
    run_retrieval(options(root, "locomo", modes=("hybrid",)), out, progress=False)
    rankings = read_rankings(out / "rankings.jsonl")
    ds = load_dataset("locomo", root / "data")
    assert set(rankings) == {s.sample_id for s in ds.samples}
    for sample in ds.samples:
        r = rankings[sample.sample_id]
        assert isinstance(r, LocomoRanking)
        turns = {t.turn_id for s in ds.histories[sample.namespace] for t in s.turns}
        assert set(r.ranked_dia_ids) == turns  # small haystack: the whole of it, no duplicates
        assert all(sid.startswith("session_") for sid in r.ranked_session_ids)
    report = (out / "report.md").read_text()
    assert "1 multi-hop [mem0: single-hop]" in report
    assert "overall (1-4)" in report


def test_run_resumes_from_an_incomplete_log(root: Path) -> None:
    out = root / "run"
    run_retrieval(options(root), out, progress=False)
    log = out / LOG_NAME
    # A finished run's log is gzipped; every reader takes it as it is.
    packed = out / (LOG_NAME + ".gz")
    assert packed.is_file() and not log.exists()
    assert packed.stat().st_size * 3 < len(gzip.decompress(packed.read_bytes()))
    full = read_log(log)
    unpack_log(log)
    assert log.is_file() and not packed.exists() and read_log(log) == full
    lines = log.read_text().splitlines(keepends=True)
    # Keep the header, the segment, the first calibration and four records; the fifth was being written
    # when the run died.
    assert '"calibration"' in lines[2]
    log.write_text("".join(lines[:7]) + lines[7][:25])
    outcome = run_retrieval(options(root), out, progress=False)
    assert (outcome.written, outcome.already_logged) == (26, 4)
    resumed = read_log(log)
    keys = [(r.mode, r.sample.sample_id) for r in resumed.records]
    assert len(keys) == len(set(keys)) == len(full.records)
    assert len(resumed.segments) == 2
    # each invocation calibrated where it started and where it ended
    assert [c.records for c in resumed.calibrations] == [0, 4, 30]
    assert load_results(out).modes["hybrid"].groups["overall"].means == (
        load_results(out).modes["hybrid"].groups["overall"].means
    )
    # A finished run resumed again asks nothing.
    assert run_retrieval(options(root), out, progress=False).written == 0


def test_calibrations_are_logged_every_hundred_questions_and_reported(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retrieval_run, "CALIBRATE_EVERY", 4)
    out = root / "run"
    run_retrieval(options(root, modes=("hybrid", "keyword")), out, progress=False)
    contents = read_log(out / LOG_NAME)
    questions = len(contents.records) // 2
    assert questions == 10
    # before the first question, after every 4 (two records each), and after the last partial window
    assert [c.records for c in contents.calibrations] == [0, 8, 16, 20]
    assert all(c.embed_ms_p50 > 0 for c in contents.calibrations)
    report = (out / "report.md").read_text()
    section = report[report.index("## Machine calibration") :]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()[6:10]]
    assert [r[0] for r in rows] == ["1-8", "9-16", "17-20", "after 20"]
    assert [r[1] for r in rows] == [f"{c.embed_ms_p50:.2f}" for c in contents.calibrations]
    first = [r.latency_ms["search"] for r in contents.records[:8] if r.mode == "keyword"]
    assert rows[0][3] == f"{statistics.median(first):.1f}" and rows[3][2:] == ["-", "-"]
    saved = json.loads((out / "results.json").read_text())
    assert [c["records"] for c in saved["calibrations"]] == [0, 8, 16, 20]


def test_resume_refuses_other_settings(root: Path) -> None:
    out = root / "run"
    run_retrieval(options(root, limit=2), out, progress=False)
    with pytest.raises(ConfigError, match="other settings"):
        run_retrieval(options(root, limit=2, ks=(1, 10)), out, progress=False)


def test_reports_regenerate_from_the_log_alone(root: Path) -> None:
    out = root / "run"
    run_retrieval(options(root), out, progress=False)
    before = {name: (out / name).read_bytes() for name in REPORT_FILES if name != "recall.png"}
    for name in REPORT_FILES:
        (out / name).unlink()
    (root / "cache").rename(root / "cache-gone")  # no store, no data needed: only the log
    (root / "data").rename(root / "data-gone")
    write_reports(out)
    for name, content in before.items():
        assert (out / name).read_bytes() == content, name
    assert (out / "recall.png").stat().st_size > 1000


def test_compare_puts_two_runs_side_by_side(root: Path) -> None:
    run_retrieval(options(root, modes=("keyword", "hybrid")), root / "a", progress=False)
    run_retrieval(options(root, modes=("hybrid",), perspective="dual"), root / "b", progress=False)
    text = format_compare(load_results(root / "a"), load_results(root / "b"), categories=True)
    assert "| hybrid | overall | session R_all@10 |" in text
    assert "| keyword | overall | session R_all@10 |" in text  # only in A: B's cells are "-"
    assert "single-session-user" in text
    assert "+0.000" in text or "-0." in text or "+0." in text
    # Paired over the questions both runs scored; a mode only in A has nothing to pair.
    hybrid_row = next(line for line in text.splitlines() if line.startswith("| hybrid | overall | session R_all@10 |"))
    assert hybrid_row.rstrip(" |").split(" | ")[-1].count(", p ") == 1
    keyword_row = next(
        line for line in text.splitlines() if line.startswith("| keyword | overall | session R_all@10 |")
    )
    assert keyword_row.endswith("| - |")


def test_compare_reads_only_the_shared_questions_by_default(root: Path) -> None:
    # A full run against a --limit run: the unpaired difference of their means says nothing.
    run_retrieval(options(root, modes=("keyword",)), root / "full", progress=False)
    run_retrieval(options(root, modes=("keyword",), limit=4), root / "part", progress=False)
    full, part = load_results(root / "full"), load_results(root / "part")
    metric = "session/recall_all@5"
    qa = per_question(full, "keyword", "overall", metric)
    qb = per_question(part, "keyword", "overall", metric)
    assert qa is not None and qb is not None and len(qb) < len(qa)
    shared = qa.keys() & qb.keys()
    row = next(
        line
        for line in format_compare(full, part).splitlines()
        if line.startswith("| keyword | overall | session R_all@5 |")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:6] == [str(len(qa)), str(len(qb)), str(len(shared))]
    assert float(cells[6]) == pytest.approx(sum(qa[q] for q in shared) / len(shared), abs=5e-4)
    assert cells[8] == "+0.000"  # the same questions in the same mode: no difference
    assert "the questions both runs scored" in format_compare(full, part)
    unpaired = format_compare(full, part, all_questions=True)
    assert "unpaired" in unpaired


def test_per_category_asks_the_first_questions_of_each_category_and_ingests_only_theirs(root: Path) -> None:
    out = root / "sampled"
    ds = load_dataset("longmemeval-s", root / "data")
    wanted: dict[str, list[str]] = {}
    for s in ds.samples:
        if len(wanted.setdefault(s.category, [])) < 2:
            wanted[s.category].append(s.sample_id)
    assert len(wanted) == 2 and sum(map(len, wanted.values())) == 4  # two categories: a sample of each
    outcome = run_retrieval(options(root, modes=("hybrid",), per_category=2), out, progress=False)
    asked = {r.sample.sample_id for r in read_log(out / (LOG_NAME + ".gz")).records}
    assert asked == {q for ids in wanted.values() for q in ids}
    assert outcome.ingest.ingested == 4 and outcome.ingest.namespaces_total == 4
    header = read_log(out / (LOG_NAME + ".gz")).header
    assert header.config.per_category == 2
    assert "the first 2 questions of each category" in (out / "report.md").read_text()
    # The store was filled from a sample: a full run afterwards ingests the rest and asks everything.
    full = run_retrieval(options(root, modes=("hybrid",)), root / "full", progress=False)
    assert full.ingest.ingested == len(ds.histories) - 4 and full.written == len(ds.samples)


def test_per_category_must_be_positive(root: Path) -> None:
    with pytest.raises(ConfigError, match="--per-category must be positive"):
        run_retrieval(options(root, per_category=0), root / "bad", progress=False)
