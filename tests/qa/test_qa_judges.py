"""LLM judges with the scripted fake: prompt choice, verdict parsing, what a verdict records, failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from qa_support import lme_sample, locomo_sample

from memlane.bench.qa.judges import JUDGES, locomo_judge, longmemeval_judge, make_judge, strict_judge
from memlane.bench.qa.prompts import get_prompt
from memlane.bench.qa.records import Failure
from memlane.core.errors import ConfigError
from memlane.core.llm import CallLog, ScriptedLLM


@pytest.fixture
def call_log(tmp_path: Path) -> Iterator[CallLog]:
    with CallLog(tmp_path / "calls.sqlite") as log:
        yield log


@pytest.mark.parametrize(
    ("qtype", "qid", "prompt_id"),
    [
        ("single-session-user", "a1", "lme-judge-default-v1"),
        ("single-session-assistant", "a2", "lme-judge-default-v1"),
        ("multi-session", "a3", "lme-judge-default-v1"),
        ("temporal-reasoning", "a4", "lme-judge-temporal-v1"),
        ("knowledge-update", "a5", "lme-judge-knowledge-update-v1"),
        ("single-session-preference", "a6", "lme-judge-preference-v1"),
        ("temporal-reasoning", "a7_abs", "lme-judge-abstention-v1"),  # _abs wins over the type
        ("multi-session", "a8_abs", "lme-judge-abstention-v1"),
    ],
)
def test_longmemeval_prompt_per_type(qtype: str, qid: str, prompt_id: str) -> None:
    judge = longmemeval_judge(ScriptedLLM("yes", model="judge-model"))
    verdict = judge.judge(lme_sample(qtype, qid=qid), "Lisbon")
    assert not isinstance(verdict, Failure)
    assert (verdict.prompt_id, verdict.prompt_sha256) == (prompt_id, get_prompt(prompt_id).sha256)
    assert (verdict.model, verdict.judge, verdict.correct) == ("judge-model", "longmemeval", True)


@pytest.mark.parametrize(
    ("reply", "correct"),
    [("yes", True), ("Yes.", True), ("YES, it is", True), ("no", False), ("No.", False), ("", False)],
)
def test_longmemeval_verdict_is_yes_in_the_lowercased_reply(reply: str, correct: bool) -> None:
    verdict = longmemeval_judge(ScriptedLLM(reply)).judge(lme_sample("multi-session"), "Lisbon")
    assert not isinstance(verdict, Failure)
    assert verdict.correct is correct
    assert verdict.score == (1.0 if correct else 0.0)
    assert verdict.reply == reply


def test_longmemeval_call_parameters_are_the_official_ones(call_log: CallLog) -> None:
    llm = ScriptedLLM("yes", call_log=call_log)
    longmemeval_judge(llm).judge(lme_sample("knowledge-update"), "Lisbon", namespace="q1")
    (call,) = call_log.list()
    request = json.loads(call.request)
    assert request["params"] == {"kind": "text", "max_tokens": 10, "schema": None, "temperature": 0.0}
    assert len(request["messages"]) == 1 and request["messages"][0]["role"] == "user"
    assert (call.purpose, call.namespace) == ("judge", "q1")


@pytest.mark.parametrize(
    ("reply", "correct"),
    [
        ('{"label": "CORRECT"}', True),
        ('The answer matches.\n{"label": "CORRECT"}', True),  # prose around the JSON is tolerated
        ('{"label": "WRONG"}', False),
        ('{"label": "correct"}', False),  # mem0 compares the label exactly
    ],
)
def test_mem0_judge_reads_the_json_label(reply: str, correct: bool) -> None:
    verdict = locomo_judge(ScriptedLLM(reply)).judge(locomo_sample(4), "Lisbon")
    assert not isinstance(verdict, Failure)
    assert verdict.correct is correct
    assert verdict.prompt_id == "locomo-judge-mem0-v1"


def test_category_5_gets_the_abstention_prompt() -> None:
    llm = ScriptedLLM('{"label": "CORRECT"}')
    verdict = locomo_judge(llm).judge(locomo_sample(5, answer="jazz"), "Not mentioned in the conversation")
    assert not isinstance(verdict, Failure)
    assert verdict.prompt_id == "abstention-judge-v1"


def test_strict_judge_prompts() -> None:
    judge = strict_judge(ScriptedLLM(['{"reason": "r", "label": "CORRECT"}', "Yes", '{"label": "WRONG"}']))
    fact = judge.judge(lme_sample("temporal-reasoning"), "Lisbon")
    rubric = judge.judge(lme_sample("single-session-preference"), "Try the Lisbon cafes")
    unanswerable = judge.judge(lme_sample("multi-session", qid="x_abs"), "Lisbon")
    assert [v.prompt_id for v in (fact, rubric, unanswerable)] == [
        "strict-judge-v1",
        "lme-judge-preference-v1",
        "abstention-judge-v1",
    ]
    assert [getattr(v, "correct", None) for v in (fact, rubric, unanswerable)] == [True, True, False]
    assert (
        "(asked on 11:07 pm on 10 April, 2023 (Monday))"
        in judge.messages(lme_sample("multi-session"), "x")[0]["content"]
    )


def test_a_label_outside_the_strict_set_is_a_failure_not_a_zero() -> None:
    verdict = strict_judge(ScriptedLLM('{"label": "MAYBE"}', model="m")).judge(locomo_sample(1), "Lisbon")
    assert isinstance(verdict, Failure)
    assert (verdict.stage, verdict.error, verdict.model) == ("judge", "LLMResponseError", "m")
    assert verdict.raw == '{"label": "MAYBE"}'
    assert verdict.prompt_sha256 == get_prompt("strict-judge-v1").sha256


def test_a_transport_failure_is_a_failure_record() -> None:
    llm = ScriptedLLM("yes", fail_on={1: "transport"})
    verdict = longmemeval_judge(llm).judge(lme_sample("multi-session"), "Lisbon")
    assert isinstance(verdict, Failure)
    assert verdict.error == "LLMTransportError"
    assert verdict.prompt_id == "lme-judge-default-v1"
    assert json.loads(json.dumps(verdict.to_json()))["stage"] == "judge"


def test_registry_and_description() -> None:
    assert sorted(JUDGES) == ["locomo-mem0", "longmemeval", "strict"]
    judge = make_judge("longmemeval", ScriptedLLM("yes", model="gpt-4o-2024-08-06"))
    described = judge.describe()
    assert described["model"] == "gpt-4o-2024-08-06"
    assert {p["prompt_id"] for p in described["prompts"]} == {  # type: ignore[attr-defined]
        "lme-judge-default-v1",
        "lme-judge-temporal-v1",
        "lme-judge-knowledge-update-v1",
        "lme-judge-preference-v1",
        "lme-judge-abstention-v1",
    }
    with pytest.raises(ConfigError):
        make_judge("lenient", ScriptedLLM("yes"))


def test_template_is_an_argument() -> None:
    judge = locomo_judge(ScriptedLLM('{"label": "CORRECT"}'), prompt="strict-judge-v1")
    verdict = judge.judge(locomo_sample(2), "Lisbon")
    assert not isinstance(verdict, Failure)
    assert verdict.prompt_id == "strict-judge-v1"
    with pytest.raises(ConfigError, match="answer prompt"):
        locomo_judge(ScriptedLLM("x"), prompt="lme-reader-direct-v1")
