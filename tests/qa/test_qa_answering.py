"""Context rendering, the answerer with the scripted fake, and LoCoMo's two-option category-5 question."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from qa_support import block

from memlane.bench.qa.answering import NOT_MENTIONED, Answer, Answerer, adversarial_question, resolve_choice
from memlane.bench.qa.context import NO_CONTEXT, render_context, render_date, retrieved_entries
from memlane.bench.qa.prompts import get_prompt
from memlane.bench.qa.records import Failure
from memlane.core.errors import ConfigError
from memlane.core.llm import ScriptedLLM
from memlane.core.model import Hit

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
JUNE_1 = datetime(2023, 6, 1, 9, 5, tzinfo=UTC)
JULY_4 = datetime(2023, 7, 4, 18, 30, tzinfo=UTC)


def test_retrieved_blocks_render_oldest_first_whatever_their_rank() -> None:
    hits = [
        Hit(block("Ana: I moved to Lisbon.", JULY_4, session="s3"), 0.9, {}),
        Hit(block("Ana: I live in Porto.", MAY_8, session="s1"), 0.8, {}),
        Hit(block("Ana: Still in Porto.", JUNE_1, session="s2", index=2), 0.7, {}),
        Hit(block("Ana: Packing boxes.", JUNE_1, session="s2", index=1), 0.6, {}),
    ]
    assert render_context(retrieved_entries(hits)) == (
        "[1:56 pm on 8 May, 2023]\nAna: I live in Porto.\n\n"
        "[9:05 am on 1 June, 2023]\nAna: Packing boxes.\n\n"
        "[9:05 am on 1 June, 2023]\nAna: Still in Porto.\n\n"
        "[6:30 pm on 4 July, 2023]\nAna: I moved to Lisbon."
    )


def test_perspectives_sharing_one_text_are_shown_once() -> None:
    user = block("user: hi\nassistant: hello", MAY_8, perspective="user")
    assistant = replace(user, id="other", perspective="assistant")
    assert len(retrieved_entries([user, assistant])) == 1


def test_facts_are_shown_on_request() -> None:
    extracted = replace(block("Ana: I moved.", MAY_8), summary="Ana moved.", contexts=("Ana lives in Lisbon.",))
    (plain,) = retrieved_entries([extracted])
    (rich,) = retrieved_entries([extracted], facts=True)
    assert plain.text == "Ana: I moved."
    assert rich.text == "Ana: I moved.\nSummary: Ana moved.\nFacts:\n- Ana lives in Lisbon."


def test_empty_context_and_dates() -> None:
    assert render_context([]) == NO_CONTEXT
    assert render_date(datetime(2023, 4, 10, 23, 7, tzinfo=UTC)) == "11:07 pm on 10 April, 2023 (Monday)"
    assert render_date(None) == "unknown"


def test_answer_uses_the_verbatim_reader_prompt() -> None:
    llm = ScriptedLLM(" Lisbon \n", model="reader")
    answerer = Answerer(llm, "lme-reader-direct-v1")
    context = retrieved_entries([block("Ana: I moved to Lisbon.", MAY_8)])
    answer = answerer.answer("Where does Ana live?", context, question_date=JULY_4)
    assert isinstance(answer, Answer)
    assert answer.text == "Lisbon"
    rendered = render_context(context)
    official = get_prompt("lme-reader-direct-v1").text.format(
        rendered, "6:30 pm on 4 July, 2023 (Tuesday)", "Where does Ana live?"
    )
    assert answerer.messages("Where does Ana live?", rendered, JULY_4) == [{"role": "user", "content": official}]
    assert answer.context_tokens == math.ceil(len(rendered) / 4)
    assert answer.prompt_tokens == math.ceil(len(official) / 4)
    assert answer.prompt_id == "lme-reader-direct-v1"
    assert answer.prompt_sha256 == get_prompt("lme-reader-direct-v1").sha256
    assert (answer.usage.model, answer.usage.cached, answer.counter) == ("reader", False, "approx-chars/4")
    assert answerer.max_tokens == 500  # the official reader's limit


def test_a_failed_answer_is_a_failure_record() -> None:
    answer = Answerer(ScriptedLLM("x", fail_on={1: "transport"})).answer("Q?", "ctx", question_date=None)
    assert isinstance(answer, Failure)
    assert (answer.stage, answer.error, answer.prompt_id) == ("answer", "LLMTransportError", "locomo-short-answer-v1")


def test_a_judge_prompt_cannot_answer() -> None:
    with pytest.raises(ConfigError):
        Answerer(ScriptedLLM("x"), "lme-judge-default-v1")


def test_adversarial_question_is_the_official_two_option_choice() -> None:
    text, options = adversarial_question("What did Caroline paint?", "a sunset", key="conv-26:3")
    assert sorted(options) == sorted([NOT_MENTIONED, "a sunset"])
    assert text == f"What did Caroline paint? Select the correct answer: (a) {options[0]} (b) {options[1]}. "
    assert adversarial_question("What did Caroline paint?", "a sunset", key="conv-26:3") == (text, options)
    orders = {adversarial_question("Q", "x", key=f"k{i}")[1][0] for i in range(20)}
    assert orders == {NOT_MENTIONED, "x"}  # both orders occur


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("a", "first"), ("(A)", "first"), (" b\n", "second"), ("(b)", "second"), ("Not mentioned", "Not mentioned")],
)
def test_resolve_choice(reply: str, expected: str) -> None:
    assert resolve_choice(reply, ("first", "second")) == expected
