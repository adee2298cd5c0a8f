"""The scripted fake: deterministic offline replies, scripts, injected failures, logging."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memlane.core.errors import LLMError, LLMResponseError, LLMTransportError
from memlane.core.llm.calllog import CallLog
from memlane.core.llm.protocol import LLM, ChatMessage
from memlane.core.llm.scripted import UNKNOWN_ANSWER, ScriptedLLM, derive_answer, sentences

EXTRACT = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["summary", "facts"],
    "additionalProperties": False,
}
DIALOGUE = "I moved to Ghent in May.  My car is a red Mazda 3! Do you like cats? I have two."


def user(text: str) -> list[ChatMessage]:
    return [{"role": "system", "content": "Extract facts."}, {"role": "user", "content": text}]


def test_is_an_llm() -> None:
    llm: LLM = ScriptedLLM()
    assert (llm.name, llm.model) == ("scripted", "scripted")


def test_default_json_derives_summary_and_facts() -> None:
    result = ScriptedLLM().complete_json(user(DIALOGUE), schema=EXTRACT)
    assert result.parsed == {
        "summary": "I moved to Ghent in May.",
        "facts": ["I moved to Ghent in May.", "My car is a red Mazda 3!", "Do you like cats?", "I have two."],
    }
    assert result.tokens_in == 2 + 20 and result.cached is False and result.latency_ms == 0.0


def test_default_json_follows_other_schemas() -> None:
    schema = {
        "type": "object",
        "properties": {
            "facts": {"type": "array", "items": {"type": "object", "properties": {"text": {"type": "string"}}}},
            "score": {"type": "integer"},
            "kind": {"type": "string", "enum": ["event", "other"]},
            "ok": {"type": ["boolean", "null"]},
        },
    }
    parsed = ScriptedLLM().complete_json(user("A. B."), schema=schema).parsed
    assert parsed == {"facts": [{"text": "A."}, {"text": "B."}], "score": 0, "kind": "event", "ok": False}
    assert ScriptedLLM().complete_json(user("One. Two.")).parsed == {"summary": "One.", "facts": ["One.", "Two."]}


def test_default_text_picks_the_line_sharing_most_words() -> None:
    messages: list[ChatMessage] = [
        {"role": "system", "content": "Answer from the memories."},
        {
            "role": "user",
            "content": "Memories:\n- The user lives in Ghent.\n- The user's car is a red Mazda.\n"
            "What colour is the user's car?",
        },
    ]
    assert ScriptedLLM().complete_text(messages).text == "- The user's car is a red Mazda."
    assert derive_answer(user("Nothing relevant here?")) == UNKNOWN_ANSWER


def test_same_input_same_output_across_instances() -> None:
    a, b = ScriptedLLM(), ScriptedLLM()
    for llm_call in ("json", "text"):
        ra = a.complete_json(user(DIALOGUE), schema=EXTRACT) if llm_call == "json" else a.complete_text(user(DIALOGUE))
        rb = b.complete_json(user(DIALOGUE), schema=EXTRACT) if llm_call == "json" else b.complete_text(user(DIALOGUE))
        assert (ra.text, ra.parsed, ra.tokens_in, ra.tokens_out) == (rb.text, rb.parsed, rb.tokens_in, rb.tokens_out)


def test_list_script_replies_in_order_then_runs_out() -> None:
    llm = ScriptedLLM(['{"summary": "s", "facts": []}', "plain answer"])
    assert llm.complete_json(user("x"), schema=EXTRACT).parsed == {"summary": "s", "facts": []}
    assert llm.complete_text(user("x")).text == "plain answer"
    with pytest.raises(LLMError, match="2 replies"):
        llm.complete_text(user("x"))
    assert ScriptedLLM("only one").complete_text(user("x")).text == "only one"


def test_callable_script_sees_the_messages() -> None:
    def responder(messages: Sequence[ChatMessage]) -> str:
        return messages[-1]["content"].upper()

    assert ScriptedLLM(responder).complete_text(user("shout")).text == "SHOUT"


def test_scripted_reply_of_wrong_shape_raises() -> None:
    with pytest.raises(LLMResponseError) as caught:
        ScriptedLLM(['{"summary": 1}']).complete_json(user("x"), schema=EXTRACT)
    assert caught.value.raw == '{"summary": 1}'


def test_fail_on_given_call_numbers(call_log: CallLog) -> None:
    llm = ScriptedLLM(
        ["first", '{"summary": "s", "facts": []}'], call_log=call_log, fail_on={2: "transport", 3: "invalid_json"}
    )
    assert llm.complete_text(user("a")).text == "first"
    with pytest.raises(LLMTransportError, match="call 2"):
        llm.complete_text(user("b"))
    with pytest.raises(LLMResponseError) as caught:
        llm.complete_json(user("c"), schema=EXTRACT)
    assert caught.value.raw is not None
    # failed calls consumed no scripted reply
    assert llm.complete_json(user("d"), schema=EXTRACT, namespace="alice").parsed == {"summary": "s", "facts": []}
    rows = call_log.list(10)
    assert [r.model for r in rows] == ["scripted"] * 4
    assert [r.error is None for r in reversed(rows)] == [True, False, False, True]
    assert rows[0].namespace == "alice" and rows[0].id == 4
    assert rows[2].response is None and rows[1].response == caught.value.raw


def test_scripted_never_reads_the_cache(call_log: CallLog) -> None:
    llm = ScriptedLLM(["one", "two"], call_log=call_log)
    assert [llm.complete_text(user("same")).text for _ in range(2)] == ["one", "two"]
    assert call_log.stats().cache_hits == 0


def test_sentences() -> None:
    assert sentences("  A b.\nC?  D!E ") == ["A b.", "C?", "D!E"]
    assert sentences("") == []
