"""`memlane bench qa` and `memlane bench sweep` through click's CliRunner, and the judge's settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from qa_run_support import lines, make_data_dir

from memlane.bench.qa.llms import LLMOverrides, answer_settings, build_llm, judge_settings
from memlane.core.errors import ConfigError
from memlane.interfaces.cli.app import cli, register_all
from memlane.settings import load

register_all()


def base_args(root: Path) -> list[str]:
    return [
        "--llm",
        "scripted",
        "--judge",
        "scripted",
        "--embedder",
        "hashing",
        "--data-dir",
        str(root / "data"),
        "--cache-dir",
        str(root / "cache"),
        "--quiet",
    ]


def test_bench_qa_writes_the_run_and_prints_the_table(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    out = tmp_path / "run"
    args = ["bench", "qa", "locomo", "--out", str(out), "--k", "2", "--mode", "keyword", *base_args(tmp_path)]
    res = CliRunner().invoke(cli, args, env={"MEMLANE_QA_PRICES": "scripted=1/2 scripted-judge=0.5/0.5"})
    assert res.exit_code == 0, res.output
    assert "| **overall** (without 5) | 7 |" in res.stdout
    assert "1 multi-hop [mem0: single-hop]" in res.stdout
    for name in ("log.jsonl", "answers.jsonl", "results.json", "report.md"):
        assert (out / name).is_file(), name
    assert len(lines(out / "answers.jsonl")) == 9
    results = json.loads((out / "results.json").read_text())
    assert (results["config"]["k"], results["config"]["mode"]) == (2, "keyword")
    assert results["judge"]["model"] == "scripted-judge"
    assert isinstance(results["aggregates"]["cost"], float) and results["aggregates"]["cost"] > 0
    assert (tmp_path / "cache" / "llm-calls.db").is_file()  # the shared call log / cache

    again = CliRunner().invoke(cli, [*args, "--json"])  # resumed: nothing asked again
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["segments"] == 2


def test_bench_qa_full_context_on_longmemeval_writes_hypotheses(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    out = tmp_path / "run"
    args = [
        "bench",
        "qa",
        "longmemeval-s",
        "--out",
        str(out),
        "--context",
        "full",
        "--limit",
        "2",
        *base_args(tmp_path),
    ]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "task-averaged" in res.stdout
    assert len(lines(out / "hypotheses.jsonl")) == 2


def test_bench_qa_rejects_an_unknown_answer_prompt(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    args = ["bench", "qa", "locomo", "--out", str(tmp_path / "run"), "--answer-prompt", "nope-v1", *base_args(tmp_path)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1
    assert "unknown prompt 'nope-v1'" in res.stderr


def test_bench_sweep_compares_the_runs(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    out = tmp_path / "sweep"
    args = ["bench", "sweep", "locomo", "--out", str(out), "--k", "1,2", "--mode", "keyword", "--limit", "2"]
    res = CliRunner().invoke(
        cli, [*args, "--answer-prompt", "locomo-short-answer-v1,resolve-dates-v1", *base_args(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    assert json.loads((out / "sweep.json").read_text())["runs"] == [
        "k1-keyword-locomo-short-answer-v1",
        "k2-keyword-locomo-short-answer-v1",
        "k1-keyword-resolve-dates-v1",
        "k2-keyword-resolve-dates-v1",
    ]
    rows = [line for line in res.stdout.splitlines() if line.startswith(("| k1-", "| k2-"))]
    assert len(rows) == 4 and "`resolve-dates-v1`" in res.stdout


def test_the_judge_defaults_to_the_answering_models_settings() -> None:
    env = {"MEMLANE_LLM_API_KEY": "k1", "MEMLANE_LLM_MODEL": "reader", "MEMLANE_LLM_BASE_URL": "http://a/v1"}
    same = judge_settings(load(env))
    assert (same.model, same.api_key, same.base_url) == ("reader", "k1", "http://a/v1")
    env |= {"MEMLANE_JUDGE_MODEL": "judge", "MEMLANE_JUDGE_API_KEY": "k2", "MEMLANE_JUDGE_BASE_URL": ""}
    other = judge_settings(load(env), concurrency=3)
    assert (other.model, other.api_key, other.base_url, other.max_concurrency) == ("judge", "k2", "http://a/v1", 3)
    assert judge_settings(load(env), LLMOverrides(model="cli-judge")).model == "cli-judge"
    assert answer_settings(load(env)).model == "reader"  # the answerer never takes the judge's settings
    with pytest.raises(ConfigError, match="MEMLANE_LLM_API_KEY"):
        judge_settings(load({"MEMLANE_LLM_MODEL": "m"}))
    assert build_llm("scripted", role="judge", call_log=None, settings=load({})).model == "scripted-judge"


def test_qa_report_recomputes_the_outputs_from_the_log(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    out = tmp_path / "run"
    args = ["bench", "qa", "locomo", "--out", str(out), "--limit", "3", *base_args(tmp_path)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert json.loads((out / "results.json").read_text())["aggregates"]["cost"] is None  # no prices given
    (out / "answers.jsonl").unlink()
    res = CliRunner().invoke(
        cli, ["bench", "qa-report", str(out), "--price", "scripted=1/0", "--price", "scripted-judge=1/0"]
    )
    assert res.exit_code == 0, res.output
    results = json.loads((out / "results.json").read_text())
    tokens_in = sum(s["tokens_in"] for s in results["aggregates"]["stages"])
    assert results["aggregates"]["cost"] == pytest.approx(tokens_in / 1_000_000)
    assert len(lines(out / "answers.jsonl")) == 3
