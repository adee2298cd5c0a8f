"""The QA pipeline end to end with the scripted fake (answers and verdicts scripted by the test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qa_run_support import LME_REPLIES, LOCOMO_REPLIES, answerer, judge, lines, make_data_dir, qa_options

from memlane.bench.qa.export import read_hypotheses
from memlane.bench.qa.prompts import get_prompt
from memlane.bench.qa.qalog import read_qa_log
from memlane.bench.qa.run import run_qa
from memlane.bench.qa.sweep import SweepGrid, run_sweep
from memlane.core.errors import ConfigError
from memlane.core.llm import CallLog, ScriptedLLM


@pytest.fixture
def root(tmp_path: Path) -> Path:
    make_data_dir(tmp_path)
    return tmp_path


def sha(prompt_id: str) -> str:
    return get_prompt(prompt_id).sha256


def test_locomo_run_scores_every_question_with_the_official_rules(root: Path) -> None:
    out = root / "run"
    llm = ScriptedLLM(answerer(LOCOMO_REPLIES), model="reader")
    outcome = run_qa(qa_options(root), out, llm=llm, judge_llm=ScriptedLLM(judge, model="judge"), progress=False)
    assert (outcome.written, outcome.already_logged, outcome.failed) == (9, 0, 0)

    answers = {a["qa_id"]: a for a in lines(out / "answers.jsonl")}
    assert list(answers) == [f"conv-a:{i}" for i in range(8)] + ["conv-b:0"]  # data-set order, rankings ids
    assert answers["conv-a:1"]["f1"] == 0.5  # multi-hop: "a cat" covers one of the two gold parts
    assert answers["conv-a:4"]["f1"] == 1.0  # open-domain: gold cut at ';'
    assert answers["conv-a:4"]["j"] == 0.0  # ... but the judge wanted the whole gold
    assert answers["conv-a:3"]["f1"] == answers["conv-a:3"]["j"] == 0.0
    # Category 5: the reply "a"/"b" is resolved to the option it names, which the phrase check accepts.
    for qa_id in ("conv-a:5", "conv-a:6"):
        assert answers[qa_id]["answer"] == "Not mentioned in the conversation"
        assert (answers[qa_id]["f1"], answers[qa_id]["j"]) == (1.0, 1.0)
        assert answers[qa_id]["judge_prompt_id"] == "abstention-judge-v1"
    assert answers["conv-a:0"]["category"] == "temporal" and answers["conv-a:0"]["category_mem0"] == "temporal"
    assert all(isinstance(a["bleu1"], float) and not a["errors"] for a in answers.values())

    results = json.loads((out / "results.json").read_text())
    overall = results["aggregates"]["overall"]
    assert overall["f1"]["mean"] == pytest.approx(5.5 / 7)  # categories 1-4 only
    assert overall["j"]["mean"] == pytest.approx(4 / 7)
    assert overall["j"]["ci_low"] <= overall["j"]["mean"] <= overall["j"]["ci_high"]
    assert results["aggregates"]["overall_all"]["j"]["n"] == 9
    cat5 = next(c for c in results["aggregates"]["categories"] if c["number"] == 5)
    assert cat5["excluded"] and cat5["metrics"]["j"]["mean"] == 1.0
    assert results["answer_prompt"] == {
        "prompt_id": "locomo-short-answer-v1",
        "prompt_sha256": sha("locomo-short-answer-v1"),
    }
    assert results["adversarial_prompt"]["prompt_id"] == "locomo-adversarial-v1"
    used = {p["prompt_id"]: (p["prompt_sha256"], p["questions"]) for p in results["judge"]["prompts"]}
    assert used == {
        "locomo-judge-mem0-v1": (sha("locomo-judge-mem0-v1"), 7),
        "abstention-judge-v1": (sha("abstention-judge-v1"), 2),
    }
    assert (results["judge"]["model"], results["judge"]["prompt_id"]) == ("judge", None)  # two prompts used
    assert results["dataset"]["sha256"] and results["config"]["k"] == 3 and results["config"]["mode"] == "hybrid"
    assert results["failed"]["samples"] == 0
    assert results["context"]["mean_tokens"] > 0
    stages = {s["stage"]: s for s in results["aggregates"]["stages"]}
    assert (stages["answer"]["calls"], stages["judge"]["calls"]) == (9, 9)
    assert stages["answer"]["models"] == ["reader"] and stages["judge"]["models"] == ["judge"]
    report = (out / "report.md").read_text()
    assert "1 multi-hop [mem0: single-hop]" in report and "`abstention-judge-v1`" in report
    assert not (out / "hypotheses.jsonl").exists()  # LongMemEval only


def test_the_context_shows_retrieved_blocks_oldest_first_with_the_question_date(root: Path) -> None:
    prompts: list[str] = []

    def reader(messages: list[dict[str, str]]) -> str:
        prompts.append(messages[-1]["content"])
        return "2022"

    run_qa(
        qa_options(root, limit=1, k=2),
        root / "run",
        llm=ScriptedLLM(reader),  # type: ignore[arg-type]
        judge_llm=ScriptedLLM(judge),
        progress=False,
    )
    (prompt,) = prompts
    stamps = [line for line in prompt.splitlines() if line.startswith("[")]
    assert 1 <= len(stamps) <= 2  # k=2 exchanges, perspectives of one exchange shown once
    assert "The question is asked on" in prompt and "unknown" not in prompt  # LoCoMo: the history's end
    record = read_qa_log(root / "run" / "log.jsonl").records[0]
    assert record.context["kind"] == "retrieved" and len(record.context["hits"]) == 4  # type: ignore[arg-type]
    assert set(record.context["retrieval_scores"]) >= {"turn/recall_all@2"}  # type: ignore[arg-type]


def test_longmemeval_run_exports_official_hypotheses_and_task_averages(root: Path) -> None:
    out = root / "run"
    llm = ScriptedLLM(answerer(LME_REPLIES))
    run_qa(qa_options(root, "longmemeval-s"), out, llm=llm, judge_llm=ScriptedLLM(judge), progress=False)
    answers = {a["question_id"]: a for a in lines(out / "answers.jsonl")}
    assert {k: a["j"] for k, a in answers.items()} == {"7e5a1001": 1.0, "c0ffee01_abs": 1.0, "a5515701": 0.0}
    assert answers["7e5a1001"]["judge_prompt_id"] == "lme-judge-temporal-v1"
    assert answers["c0ffee01_abs"]["judge_prompt_id"] == "lme-judge-abstention-v1"
    assert answers["a5515701"]["judge_prompt_id"] == "lme-judge-default-v1"
    # The official evaluate_qa.py reads the file this way; every question is there with its answer.
    assert read_hypotheses(out / "hypotheses.jsonl") == {k: a["answer"] for k, a in answers.items()}
    results = json.loads((out / "results.json").read_text())
    agg = results["aggregates"]
    assert agg["task_averaged"]["j"]["mean"] == pytest.approx(2 / 3)
    assert agg["abstention"]["j"]["mean"] == 1.0 and agg["abstention"]["j"]["n"] == 1
    assert results["answer_prompt"]["prompt_id"] == "lme-reader-con-v1"  # auto for LongMemEval
    assert results["adversarial_prompt"] is None
    assert results["hypotheses"] == {"written": 3, "left_out_failed": 0}


def test_failed_calls_are_recorded_and_counted_never_scored_zero(root: Path) -> None:
    out = root / "run"
    # One answer fails (call 2 of the reader) and one verdict (call 3 of the judge); concurrency 1 fixes the order.
    llm = ScriptedLLM(answerer(LOCOMO_REPLIES), fail_on={2: "transport"})
    judge_llm = ScriptedLLM(judge, fail_on={3: "invalid_json"})
    outcome = run_qa(qa_options(root, concurrency=1), out, llm=llm, judge_llm=judge_llm, progress=False)
    assert outcome.failed == 2
    answers = lines(out / "answers.jsonl")
    assert len(answers) == 9  # nothing dropped
    no_answer, no_verdict = answers[1], answers[3]
    assert no_answer["failed"] and no_answer["answer"] is None
    assert (no_answer["f1"], no_answer["bleu1"], no_answer["j"]) == (None, None, None)
    assert no_answer["errors"][0]["stage"] == "answer" and no_answer["errors"][0]["error"] == "LLMTransportError"
    assert no_verdict["failed"] and no_verdict["j"] is None and no_verdict["f1"] == 0.0  # lexical scores kept
    assert no_verdict["errors"][0]["stage"] == "judge"
    results = json.loads((out / "results.json").read_text())
    assert results["failed"] == {"samples": 2, "retrieve": 0, "extract": 0, "answer": 1, "judge": 1}
    overall_j = results["aggregates"]["overall"]["j"]
    assert (overall_j["n"], overall_j["failed"]) == (5, 2)  # 7 questions in categories 1-4
    assert overall_j["mean"] == pytest.approx(4 / 5)  # the two failures are not averaged in as zeros
    assert "## Failures" in (out / "report.md").read_text()


def test_retry_failed_asks_only_the_failed_questions_again(root: Path) -> None:
    out = root / "run"
    run_qa(
        qa_options(root, concurrency=1),
        out,
        llm=ScriptedLLM(answerer(LOCOMO_REPLIES), fail_on={2: "transport"}),
        judge_llm=ScriptedLLM(judge),
        progress=False,
    )
    again = ScriptedLLM(answerer(LOCOMO_REPLIES))
    outcome = run_qa(
        qa_options(root, concurrency=1, retry_failed=True), out, llm=again, judge_llm=ScriptedLLM(judge), progress=False
    )
    assert (outcome.written, outcome.already_logged, again.calls) == (1, 8, 1)
    assert not any(a["failed"] for a in lines(out / "answers.jsonl"))


def test_extraction_of_the_retrieved_exchanges_feeds_the_context(root: Path) -> None:
    prompts: list[str] = []

    def reader(messages: list[dict[str, str]]) -> str:
        if messages[0]["role"] == "system":  # the extraction prompt
            return json.dumps({"summary": "Ana paints.", "facts": ["Ana painted a sunrise in 2022."]})
        prompts.append(messages[-1]["content"])
        return "2022"

    out = root / "run"
    with CallLog(root / "calls.db") as log:
        run_qa(
            qa_options(root, limit=2, k=2, extract=True),
            out,
            llm=ScriptedLLM(reader, call_log=log),  # type: ignore[arg-type]
            judge_llm=ScriptedLLM(judge),
            progress=False,
        )
        extract_calls = [r for r in log.list(100) if r.purpose == "extract"]
    assert all("Facts:\n- Ana painted a sunrise in 2022." in p for p in prompts)
    # The harness bounds extraction replies (the core's extractor sets no limit; small models loop).
    assert extract_calls and all(json.loads(r.request)["params"]["max_tokens"] == 512 for r in extract_calls)
    results = json.loads((out / "results.json").read_text())
    stages = {s["stage"]: s["calls"] for s in results["aggregates"]["stages"]}
    assert 1 <= stages["extract"] <= 4 and stages["answer"] == 2  # one call per retrieved exchange
    assert results["config"]["extract"]["prompt_ref"].startswith("extract-v1@")


def test_full_context_and_oracle_baselines_record_truncation(root: Path) -> None:
    out = root / "oracle"
    opts = qa_options(root, "longmemeval-oracle", context="full", answer_prompt="lme-reader-direct-v1")
    run_qa(opts, out, llm=ScriptedLLM(answerer(LME_REPLIES)), judge_llm=ScriptedLLM(judge), progress=False)
    (answer,) = lines(out / "answers.jsonl")
    assert (answer["question_id"], answer["j"]) == ("0a1b2c3d", 1.0)
    record = read_qa_log(out / "log.jsonl").records[0]
    assert record.context["kind"] == "full" and record.context["truncated"] is False
    results = json.loads((out / "results.json").read_text())
    assert results["store"] is None and results["config"]["retrieval"] is None
    assert results["config"]["full_context_budget"] == opts.full_context_budget

    tight = root / "tight"
    opts = qa_options(root, "longmemeval-s", context="full", full_context_budget=40)
    run_qa(opts, tight, llm=ScriptedLLM(answerer(LME_REPLIES)), judge_llm=ScriptedLLM(judge), progress=False)
    results = json.loads((tight / "results.json").read_text())
    assert results["context"]["truncated"] == 3
    assert all(a["context_tokens"] <= 40 for a in lines(tight / "answers.jsonl"))


def test_a_run_folder_refuses_other_settings(root: Path) -> None:
    out = root / "run"
    run_qa(qa_options(root, limit=2), out, llm=ScriptedLLM(answerer({})), judge_llm=ScriptedLLM(judge), progress=False)
    with pytest.raises(ConfigError, match="answer_prompt"):
        run_qa(
            qa_options(root, limit=2, answer_prompt="resolve-dates-v1"),
            out,
            llm=ScriptedLLM(answerer({})),
            judge_llm=ScriptedLLM(judge),
            progress=False,
        )


def test_sweep_runs_the_grid_over_one_store_and_compares(root: Path) -> None:
    out = root / "sweep"
    grid = SweepGrid(
        ks=(1, 3), modes=("keyword", "hybrid"), answer_prompts=("locomo-short-answer-v1",), full_context=True
    )
    outcome = run_sweep(
        qa_options(root, limit=3),
        grid,
        out,
        llm=ScriptedLLM(answerer(LOCOMO_REPLIES)),
        judge_llm=ScriptedLLM(judge),
        progress=False,
    )
    names = [name for name, _ in outcome.runs]
    assert names == [
        "k1-keyword-locomo-short-answer-v1",
        "k3-keyword-locomo-short-answer-v1",
        "k1-hybrid-locomo-short-answer-v1",
        "k3-hybrid-locomo-short-answer-v1",
        "full-locomo-short-answer-v1",
    ]
    ingests = [o.ingest for _, o in outcome.runs]
    assert ingests[0] is not None and not ingests[0].warm  # the first run ingests ...
    assert all(i is not None and i.warm for i in ingests[1:4])  # ... the others reuse the store
    assert ingests[4] is None  # full context needs no store
    table = (out / "sweep.md").read_text()
    assert all(f"| {name} |" in table for name in names)
    for name in names:
        assert json.loads((out / name / "results.json").read_text())["questions"] == 3
