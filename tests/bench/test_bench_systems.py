"""Systems under test behind one protocol: memlane's presets, the baselines and a fake system in this file go
through the same loop, metric code, report and exported rankings; ``--system`` parsing errors exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path

import pytest
from bench_runs import make_data_dir, options
from click.testing import CliRunner

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.model import Session
from memlane.bench.datasets.registry import DATASETS, load_dataset
from memlane.bench.reports.results import load_results
from memlane.bench.retrieval.history import HaystackIndex
from memlane.bench.retrieval.rankings import LongMemEvalRanking, read_rankings
from memlane.bench.retrieval.run import rank_hits, run_retrieval
from memlane.bench.retrieval.runlog import LOG_NAME, read_log
from memlane.bench.systems import (
    SYSTEMS,
    Hit,
    System,
    SystemContext,
    SystemFailure,
    parse_system_spec,
    register_system,
)
from memlane.core.errors import ValidationError
from memlane.interfaces.cli.app import cli, register_all

register_all()


class ReverseSystem:
    """A fake peer: ranks a user's sessions last first, one item per user turn of each session. Fails on
    questions containing "FAIL", and its ingest fails for users named in ``bad_users``."""

    name = "reverse"
    version = "0.0.1"
    ranks_turns = True
    cuts_rankings = False

    def __init__(self, family: Family, bad_users: frozenset[str] = frozenset()) -> None:
        self.family = family
        self.bad_users = bad_users
        self.held: dict[str, list[Session]] = {}
        self.calls: list[str] = []

    def settings(self) -> dict[str, object]:
        return {"system": self.name, "version": self.version, "order": "last session first"}

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        self.calls.append(f"ingest {user}")
        if user in self.bad_users:
            raise SystemFailure(f"cannot store {user}")
        self.held[user] = list(sessions)

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        if "FAIL" in query:
            raise SystemFailure("search refused")
        hits = [
            Hit(t.turn_id, 1.0 / (i + 1), s.session_id, (t.turn_id,), t.content)
            for i, s in enumerate(reversed(self.held[user]))
            for t in s.turns
        ]
        return hits[:k]

    def reset(self, user: str) -> None:
        self.calls.append(f"reset {user}")
        self.held.pop(user, None)

    def close(self) -> None:
        self.calls.append("close")


MADE: list[ReverseSystem] = []


def _reverse_factory(opts: Mapping[str, str], context: SystemContext) -> System:
    bad = frozenset(u for u in opts.get("bad", "").split("+") if u)
    system = ReverseSystem(context.family, bad)
    MADE.append(system)
    return system


@pytest.fixture
def reverse() -> Iterator[None]:
    register_system("reverse", _reverse_factory)
    MADE.clear()
    yield
    SYSTEMS.pop("reverse", None)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    make_data_dir(tmp_path)
    return tmp_path


def test_spec_parsing() -> None:
    spec = parse_system_spec("mem0:infer=true,threshold=0.2")
    assert (spec.name, spec.options, spec.label) == ("mem0", {"infer": "true", "threshold": "0.2"}, spec.label)
    assert spec.label == "mem0:infer=true,threshold=0.2"
    assert parse_system_spec("memlane:mode=vector,as=ml-vector").label == "ml-vector"
    assert parse_system_spec("engram").params == ()
    for bad, message in (
        ("nope", "unknown system 'nope'"),
        ("mem0:infer", "'infer' is not key=value"),
        ("mem0:infer=true,infer=false", "'infer' given twice"),
        ("Mem0", "lower-case name"),
        ("mem0:as=a/b", "label 'a/b'"),
    ):
        with pytest.raises(ValidationError, match=message):
            parse_system_spec(bad)


def test_fake_system_goes_through_the_same_loop_metrics_and_rankings(root: Path, reverse: None) -> None:
    out = root / "run"
    specs = (parse_system_spec("memlane:mode=keyword"), parse_system_spec("reverse"))
    outcome = run_retrieval(options(root, modes=(), systems=specs), out, progress=False)
    assert (outcome.written, outcome.errors) == (20, 0)
    [system] = MADE
    ds = load_dataset("longmemeval-s", root / "data")
    namespaces = list(dict.fromkeys(s.namespace for s in ds.samples))
    # each namespace ingested after a reset, reset again after its questions; closed at the end
    expected = [c for ns in namespaces for c in (f"reset {ns}", f"ingest {ns}", f"reset {ns}")] + ["close"]
    assert system.calls == expected
    contents = read_log(out / LOG_NAME)
    assert contents.header.config.modes == ("memlane:mode=keyword", "reverse")
    assert contents.header.config.search_settings["reverse"]["order"] == "last session first"
    family = DATASETS["longmemeval-s"].family
    rankings = read_rankings(out / "rankings.reverse.jsonl")
    for record in (r for r in contents.records if r.mode == "reverse"):
        haystack = ds.histories[record.sample.namespace]
        sessions = [s.session_id for s in reversed(haystack)]
        # the rankings follow the system's hits; turn rankings keep the family's target (user) turns only
        assert list(record.ranked_session_ids) == sessions[: len(record.ranked_session_ids)]
        user_turns = [t.turn_id for s in reversed(haystack) for t in s.turns if t.role == "user"]
        assert list(record.ranked_turn_ids) == user_turns[: len(record.ranked_turn_ids)]
        ranking = rankings[record.sample.sample_id]
        assert isinstance(ranking, LongMemEvalRanking)
        assert ranking.ranked_session_ids == record.ranked_session_ids
        # scored by the family's own metric code
        dates = {s.session_id: s.started_at for s in haystack}  # and whether the newest evidence came first
        assert record.scores == family.score(
            record.sample, record.ranked_session_ids, record.ranked_turn_ids, (1, 3, 5, 10, 50), session_dates=dates
        )
    # the first record of each namespace carries what its ingest cost
    first = {r.sample.namespace: r for r in reversed([r for r in contents.records if r.mode == "reverse"])}
    assert all("ingest" in r.latency_ms for r in first.values())
    results = load_results(out)
    assert set(results.modes) == {"memlane:mode=keyword", "reverse"}
    report = (out / "report.md").read_text()
    assert "| reverse |" in report and "| memlane:mode=keyword |" in report


def test_memlane_system_and_baseline_system_match_mode_and_baselines_runs(root: Path) -> None:
    by_mode = root / "by-mode"
    by_system = root / "by-system"
    run_retrieval(options(root, modes=("keyword",), baselines=("bm25-sessions", "bm25-turns")), by_mode, progress=False)
    specs = tuple(
        parse_system_spec(s)
        for s in (
            "memlane:mode=keyword,as=keyword",
            "baseline:name=bm25-sessions,as=bm25-sessions",
            "baseline:name=bm25-turns,as=bm25-turns",
        )
    )
    run_retrieval(options(root, modes=(), systems=specs), by_system, progress=False)
    for name in ("keyword", "bm25-sessions", "bm25-turns"):
        a = (by_mode / f"rankings.{name}.jsonl").read_text()
        b = (by_system / f"rankings.{name}.jsonl").read_text()
        assert a == b, name
    ra = json.loads((by_mode / "results.json").read_text())["modes"]
    rb = json.loads((by_system / "results.json").read_text())["modes"]
    for name in ("keyword", "bm25-sessions", "bm25-turns"):
        assert ra[name]["groups"]["overall"]["means"] == rb[name]["groups"]["overall"]["means"], name


def test_failures_are_logged_errors_not_crashes(root: Path, reverse: None) -> None:
    ds = load_dataset("longmemeval-s", root / "data")
    bad = ds.samples[0].namespace
    out = root / "run"
    outcome = run_retrieval(
        options(root, modes=(), systems=(parse_system_spec(f"reverse:bad={bad}"),)), out, progress=False
    )
    failed = [r for r in read_log(out / LOG_NAME).records if r.error]
    assert outcome.errors == len(failed) == sum(s.namespace == bad for s in ds.samples)
    assert all(r.error and r.error.startswith("ingest: SystemFailure: cannot store") for r in failed)
    assert all(r.retrieved_sessions == 0 for r in failed)  # padding only, scored like any ranking


def test_rank_hits_keeps_target_turns_and_cuts_only_when_asked() -> None:
    index = HaystackIndex("u", ("s1", "s2", "s3"), ("s1_1", "s2_1", "s3_1"))
    hits = [Hit("a", 1.0, "s3", ("s3_1", "s3_2")), Hit("b", 0.5, "s1", ("s1_2",)), Hit("c", 0.1, "s3", ("s3_1",))]
    r = rank_hits(hits, index, 2)
    assert r.session_ids == ("s3", "s1") and r.retrieved_sessions == 2
    assert r.turn_ids == ("s3_1", "s1_1") and r.retrieved_turns == 1  # s1_2 is no target; padded with s1_1
    full = rank_hits([Hit(str(i), 1.0, s, ()) for i, s in enumerate(("s1", "s2", "s3"))], index, 2)
    assert full.session_ids == ("s1", "s2", "s3")  # every retrieved entry kept
    assert rank_hits(
        [Hit(str(i), 1.0, s, ()) for i, s in enumerate(("s1", "s2", "s3"))], index, 2, cut=True
    ).session_ids == ("s1", "s2")


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    res = CliRunner().invoke(cli, args, env=env)
    return res.exit_code, res.stderr


def test_system_option_errors_exit_2_with_a_message(root: Path, reverse: None) -> None:
    env = {
        "MEMLANE_DATA": str(root / "data"),
        "MEMLANE_BENCH_CACHE": str(root / "cache"),
        "MEMLANE_BENCH_EMBEDDER": "hashing",
        "MEMLANE_BENCH_QUIET": "1",
    }
    base = ["bench", "retrieval", "longmemeval-s", "--out", str(root / "r"), "--limit", "2"]
    for value, message in (
        ("nosuch", "unknown system 'nosuch'"),
        ("mem0:infer", "'infer' is not key=value"),
        ("memlane:colour=blue", "unknown option 'colour'"),
        ("memlane:mode=fuzzy", "unknown search mode 'fuzzy'"),
        ("baseline:name=bm25-sideways", "name= must be one of"),
    ):
        code, err = _run([*base, "--system", value], env)
        assert code == 2, (value, err)
        assert message in err, (value, err)
        assert "Traceback" not in err
    code, err = _run([*base, "--system", "reverse", "--system", "reverse"], env)
    assert code == 2 and "share the name 'reverse'" in err
    # by environment variable, space-separated; without --mode only the systems run
    code, err = _run(base, env | {"MEMLANE_BENCH_SYSTEMS": "reverse memlane:mode=keyword"})
    assert code == 0, err
    assert read_log(root / "r" / LOG_NAME).header.config.modes == ("reverse", "memlane:mode=keyword")
