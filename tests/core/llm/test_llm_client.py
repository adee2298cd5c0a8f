"""The OpenAI-compatible client against a real in-process HTTP server (nothing of the client is mocked)."""

from __future__ import annotations

import dataclasses
import email.utils
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from fakeserver import FAKE_API_KEY as TEST_KEY
from fakeserver import FAKE_MODEL as TEST_MODEL
from fakeserver import FakeChatServer, Reply

from memlane.core.errors import LLMResponseError, LLMTransportError, ValidationError
from memlane.core.llm.calllog import CallLog
from memlane.core.llm.openai_client import OpenAIChatClient
from memlane.core.llm.protocol import ChatMessage

MakeClient = Callable[..., OpenAIChatClient]

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def ask(text: str = "What is the answer?") -> list[ChatMessage]:
    return [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": text}]


def test_json_success_sends_schema_and_records_usage(
    fake_server: FakeChatServer, make_client: MakeClient, call_log: CallLog
) -> None:
    client = make_client(call_log=call_log)
    result = client.complete_json(ask(), schema=SCHEMA, purpose="extract", namespace="alice")

    assert result.parsed == {"answer": "ok"}
    assert (result.tokens_in, result.tokens_out, result.cached, result.model) == (11, 5, False, TEST_MODEL)
    body = fake_server.requests[0].body
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert body["model"] == TEST_MODEL and body["temperature"] == 0.0 and "max_tokens" not in body
    assert "JSON" in body["messages"][-1]["content"]  # instruction appended to the last user message
    assert len(body["messages"]) == 2
    [row] = call_log.list(5)
    assert row.id == result.call_id
    assert (row.tokens_in, row.tokens_out, row.attempts, row.error, row.cached) == (11, 5, 1, None, False)
    assert (row.purpose, row.namespace, row.model, row.response) == ("extract", "alice", TEST_MODEL, result.text)


def test_text_call_sends_no_response_format(fake_server: FakeChatServer, make_client: MakeClient) -> None:
    fake_server.default_content = "Ghent."
    result = make_client().complete_text(ask("Where do I live?"), max_tokens=20, temperature=0.3)
    assert (result.text, result.parsed, result.call_id) == ("Ghent.", None, None)
    body = fake_server.requests[0].body
    assert "response_format" not in body
    assert body["max_tokens"] == 20 and body["temperature"] == 0.3
    assert body["messages"] == ask("Where do I live?")


def test_retries_429_500_and_timeout_then_succeeds(
    fake_server: FakeChatServer, make_client: MakeClient, sleeps: list[float], call_log: CallLog
) -> None:
    fake_server.queue(
        Reply(status=429, headers={"Retry-After": "2"}), Reply(status=503), Reply(delay_s=1.0, content="{}")
    )
    client = make_client(call_log=call_log, timeout_s=0.15)
    result = client.complete_json(ask(), schema=SCHEMA)

    assert result.parsed == {"answer": "ok"}
    assert fake_server.count == 4
    assert len(sleeps) == 3
    assert sleeps[0] == 2.0  # Retry-After obeyed exactly
    assert 0.0 <= sleeps[1] <= 0.5 * 2 and 0.0 <= sleeps[2] <= 0.5 * 4  # full jitter within the doubling bound
    assert call_log.list(1)[0].attempts == 4


def test_retry_after_http_date_and_cap(
    fake_server: FakeChatServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    fake_server.queue(
        Reply(status=429, headers={"Retry-After": date}), Reply(status=429, headers={"Retry-After": "999"})
    )
    make_client(retry_after_cap_s=45.0).complete_text(ask())
    assert 28.0 <= sleeps[0] <= 30.5
    assert sleeps[1] == 45.0


def test_gives_up_after_max_retries_and_logs_failure(
    fake_server: FakeChatServer, make_client: MakeClient, sleeps: list[float], call_log: CallLog
) -> None:
    fake_server.queue(*[Reply(status=500) for _ in range(3)])
    client = make_client(call_log=call_log, max_retries=2)
    with pytest.raises(LLMTransportError, match=r"after 3 attempts.*HTTP 500"):
        client.complete_text(ask(), namespace="bob")
    assert fake_server.count == 3 and len(sleeps) == 2
    [row] = call_log.list(5)
    assert row.error is not None and "HTTP 500" in row.error
    assert (row.attempts, row.response, row.namespace) == (3, None, "bob")


def test_connection_refused_is_retried_then_raises(make_client: MakeClient, sleeps: list[float]) -> None:
    with FakeChatServer() as gone:
        url = gone.url
    client = make_client(base_url=url, max_retries=2)
    with pytest.raises(LLMTransportError, match="connection failed"):
        client.complete_text(ask())
    assert len(sleeps) == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_non_retryable_status_raises_at_once(
    fake_server: FakeChatServer, make_client: MakeClient, sleeps: list[float], status: int
) -> None:
    fake_server.queue(Reply(status=status, body='{"error": {"message": "model fake-model does not exist"}}'))
    with pytest.raises(LLMTransportError, match=rf"HTTP {status}.*does not exist"):
        make_client().complete_json(ask(), schema=SCHEMA)
    assert fake_server.count == 1 and sleeps == []


def test_invalid_json_is_reasked_then_raises_with_raw(
    fake_server: FakeChatServer, make_client: MakeClient, sleeps: list[float], call_log: CallLog
) -> None:
    fake_server.queue(*[Reply(content="Sure! The answer is ok.") for _ in range(3)])
    with pytest.raises(LLMResponseError) as caught:
        make_client(call_log=call_log).complete_json(ask(), schema=SCHEMA)
    assert caught.value.raw == "Sure! The answer is ok."
    assert fake_server.count == 3 and sleeps == []  # parse retries do not back off
    repair = fake_server.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": "Sure! The answer is ok."}
    assert "not usable" in repair[-1]["content"]
    [row] = call_log.list(5)
    assert row.error is not None and row.error.startswith("LLMResponseError")
    assert row.response == "Sure! The answer is ok." and row.attempts == 3


def test_invalid_json_once_then_valid(fake_server: FakeChatServer, make_client: MakeClient) -> None:
    fake_server.queue(Reply(content='{"answer": '), Reply(content='```json\n{"answer": "fenced"}\n```'))
    result = make_client().complete_json(ask(), schema=SCHEMA)
    assert result.parsed == {"answer": "fenced"}
    assert (result.tokens_in, result.tokens_out) == (22, 10)  # both attempts were paid for


def test_wrong_shape_is_rejected(fake_server: FakeChatServer, make_client: MakeClient) -> None:
    fake_server.default_content = '{"answer": 3, "extra": true}'
    with pytest.raises(LLMResponseError, match=r"\$\.answer: expected string") as caught:
        make_client(max_parse_retries=1).complete_json(ask(), schema=SCHEMA)
    assert "extra" not in str(caught.value)  # only what was asked for is checked
    assert fake_server.count == 2


def test_extra_keys_are_dropped_and_counted(
    fake_server: FakeChatServer, make_client: MakeClient, call_log: CallLog
) -> None:
    # Local servers in JSON mode often add a key of their own: the reply is used, the key is counted.
    fake_server.default_content = '{"answer": "ok", "confidence": 0.9, "note": "x"}'
    result = make_client(call_log=call_log).complete_json(ask(), schema=SCHEMA)
    assert result.parsed == {"answer": "ok"}
    assert fake_server.count == 1
    [row] = call_log.list(5)
    assert row.error is None and row.ignored_keys == 2
    assert call_log.stats().ignored_keys == 2


def test_bad_schema_is_a_validation_error(make_client: MakeClient) -> None:
    with pytest.raises(ValidationError, match=r"schema\.properties\.answer\.type"):
        make_client().complete_json(ask(), schema={"properties": {"answer": {"type": "text"}}})


def test_falls_back_when_schema_in_response_format_is_refused(
    fake_server: FakeChatServer, make_client: MakeClient, sleeps: list[float]
) -> None:
    fake_server.reject_schema_status = 400
    client = make_client()
    assert client.complete_json(ask(), schema=SCHEMA).parsed == {"answer": "ok"}
    assert [r.body["response_format"] for r in fake_server.requests] == [
        {"type": "json_object", "schema": SCHEMA},
        {"type": "json_object"},
    ]
    assert client.json_mode == "json_object" and sleeps == []
    client.complete_json(ask("again"), schema=SCHEMA)  # remembered: no second refusal
    assert fake_server.count == 3
    assert fake_server.requests[2].body["response_format"] == {"type": "json_object"}


def test_falls_back_to_prompting_when_json_mode_is_refused(
    fake_server: FakeChatServer, make_client: MakeClient
) -> None:
    fake_server.reject_json_mode_status = 500  # llama.cpp answers an unsupported format with a 500
    fake_server.default_content = 'Here you go: {"answer": "prompted"} Hope that helps.'
    client = make_client()
    assert client.complete_json(ask(), schema=SCHEMA).parsed == {"answer": "prompted"}
    assert client.json_mode == "prompt"
    assert "response_format" not in fake_server.requests[-1].body
    assert "JSON Schema" in fake_server.requests[-1].body["messages"][-1]["content"]
    assert fake_server.count == 3


def test_cache_serves_identical_call_without_request(
    fake_server: FakeChatServer, make_client: MakeClient, call_log: CallLog
) -> None:
    client = make_client(call_log=call_log)
    first = client.complete_json(ask(), schema=SCHEMA, namespace="alice")
    second = client.complete_json(ask(), schema=SCHEMA, namespace="bob", purpose="again")
    assert fake_server.count == 1
    assert second.cached and not first.cached
    assert (second.text, second.parsed, second.tokens_in) == (first.text, first.parsed, first.tokens_in)
    newest = call_log.list(1)[0]
    assert newest.cached and newest.attempts == 0 and newest.namespace == "bob"
    assert newest.cache_key == call_log.list(2)[1].cache_key

    client.complete_json(ask(), schema=SCHEMA, temperature=0.7)  # other parameters: another key
    client.complete_text(ask())  # text and JSON never share a key
    assert fake_server.count == 3
    stats = call_log.stats()
    assert (stats.calls, stats.cache_hits, stats.errors, stats.tokens_in) == (4, 1, 0, 33)


def test_failed_calls_are_never_served_from_cache(
    fake_server: FakeChatServer, make_client: MakeClient, call_log: CallLog
) -> None:
    fake_server.queue(Reply(status=400, body="bad request"))
    client = make_client(call_log=call_log)
    with pytest.raises(LLMTransportError):
        client.complete_text(ask())
    assert client.complete_text(ask()).cached is False
    assert fake_server.count == 2
    assert make_client(call_log=call_log, use_cache=False).complete_text(ask()).cached is False
    assert fake_server.count == 3


def test_concurrency_limit_is_honoured(fake_server: FakeChatServer, make_client: MakeClient) -> None:
    fake_server.default_delay_s = 0.05
    client = make_client(max_concurrency=2)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: client.complete_text(ask(f"question {i}")), range(8)))
    assert len(results) == 8 and fake_server.count == 8
    assert fake_server.max_in_flight == 2


def test_api_key_sent_as_bearer_and_never_logged(
    fake_server: FakeChatServer, make_client: MakeClient, call_log: CallLog
) -> None:
    client = make_client(call_log=call_log)
    client.complete_json(ask(), schema=SCHEMA)
    fake_server.queue(Reply(status=401, body="bad key"))
    with pytest.raises(LLMTransportError) as caught:
        client.complete_text(ask("other"))
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {TEST_KEY}"
    assert TEST_KEY not in str(caught.value) and TEST_KEY not in repr(client.settings)
    for row in call_log.list(10):
        assert all(TEST_KEY not in str(value) for value in dataclasses.astuple(row))
    stored = b"".join(p.read_bytes() for p in call_log.path.parent.iterdir() if p.is_file())
    assert TEST_KEY.encode() not in stored


def test_delete_namespace_removes_calls_and_their_cache(
    fake_server: FakeChatServer, make_client: MakeClient, call_log: CallLog
) -> None:
    client = make_client(call_log=call_log)
    client.complete_text(ask(), namespace="alice")
    client.complete_text(ask("other"), namespace="bob")
    assert call_log.delete_namespace("alice") == 1
    assert [r.namespace for r in call_log.list(10)] == ["bob"]
    client.complete_text(ask(), namespace="alice")
    assert fake_server.count == 3  # alice's cached reply went with her


def test_bad_messages_are_rejected_before_any_request(fake_server: FakeChatServer, make_client: MakeClient) -> None:
    with pytest.raises(ValidationError, match=r"messages\[0\]\.role"):
        make_client().complete_text([{"role": "robot", "content": "hi"}])
    with pytest.raises(ValidationError, match="at least one message"):
        make_client().complete_text([])
    assert fake_server.count == 0
