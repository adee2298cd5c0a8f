"""ChatLLM: the options of complete_json and complete_text reach ``_run`` as one ChatCall, at their
defaults when not given; a keyword neither call takes is a TypeError, as for a named parameter."""

from __future__ import annotations

from typing import Any

import pytest

from memlane.core.errors import ValidationError
from memlane.core.llm.chat import ChatCall, ChatLLM
from memlane.core.llm.protocol import LLM, CallUsage, ChatMessage, LLMResult

MESSAGES: list[ChatMessage] = [{"role": "user", "content": "hello"}]
SCHEMA = {"type": "object"}


class Recording(ChatLLM):
    name = "recording"
    model = "m"

    def __init__(self) -> None:
        self.calls: list[ChatCall] = []

    def _run(self, call: ChatCall) -> LLMResult:
        self.calls.append(call)
        return LLMResult(self.model, None, None, 0.0, False, None, text="{}", parsed={})


def test_defaults_when_no_option_is_given() -> None:
    llm = Recording()
    llm.complete_text(MESSAGES)
    llm.complete_json(MESSAGES)
    text, json_call = llm.calls
    assert text == ChatCall(MESSAGES, None, False, 0.0, None, "", None, None, None)
    assert json_call == ChatCall(MESSAGES, None, True, 0.0, None, "", None, None, None)


def test_every_option_reaches_the_call_and_passes_on_unchanged() -> None:
    llm = Recording()
    common: dict[str, Any] = {
        "temperature": 0.5,
        "max_tokens": 9,
        "purpose": "judge",
        "namespace": "u",
        "block_id": "b",
    }
    llm.complete_json(MESSAGES, schema=SCHEMA, deadline=12.5, **common)
    llm.complete_text(MESSAGES, **common)
    json_call, text = llm.calls
    assert json_call == ChatCall(MESSAGES, SCHEMA, True, 0.5, 9, "judge", "u", "b", 12.5)
    assert text == ChatCall(MESSAGES, None, False, 0.5, 9, "judge", "u", "b", None)
    again = Recording()
    json_call.ask(again)
    text.ask(again)
    assert again.calls == [json_call, text]


@pytest.mark.parametrize(
    ("method", "options", "name"),
    [
        ("complete_text", {"schema": SCHEMA}, "schema"),
        ("complete_text", {"deadline": 1.0}, "deadline"),
        ("complete_json", {"temprature": 0.2}, "temprature"),
        ("complete_text", {"purpose": "x", "model": "other"}, "model"),
    ],
)
def test_a_keyword_the_call_does_not_take_is_a_type_error(method: str, options: dict[str, Any], name: str) -> None:
    llm = Recording()
    with pytest.raises(TypeError, match=f"{method}\\(\\) got an unexpected keyword argument '{name}'"):
        getattr(llm, method)(MESSAGES, **options)
    assert llm.calls == []


def test_the_schema_and_the_messages_are_checked_before_the_call() -> None:
    llm: LLM = Recording()
    with pytest.raises(ValidationError):
        llm.complete_json([], schema=SCHEMA)
    with pytest.raises(ValidationError):
        llm.complete_json(MESSAGES, schema={"type": "no such type"})


def test_a_result_is_its_usage_and_its_reply() -> None:
    result = LLMResult("m", 3, 4, 1.5, True, 7, text='{"a": 1}', parsed={"a": 1})
    usage = CallUsage.of(result)
    assert usage == CallUsage("m", 3, 4, 1.5, True, 7) and type(usage) is CallUsage
    assert usage.to_json() == {
        "model": "m",
        "tokens_in": 3,
        "tokens_out": 4,
        "latency_ms": 1.5,
        "cached": True,
        "call_id": 7,
    }
    with pytest.raises(TypeError):  # the reply is keyword-only: a positional call cannot mix the fields up
        LLMResult('{"a": 1}', {"a": 1}, "m", 3, 4, 1.5, True, 7)  # type: ignore[call-arg, arg-type]
