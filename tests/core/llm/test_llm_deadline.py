"""A call with a deadline ends by it, whatever the server does: every attempt's timeout, the backoff between
retries (a Retry-After included), the wait for a request slot and the re-asks after bad replies fit before it,
instead of adding up per attempt (memlane's defaults: 60 s an attempt, 4 retries, up to 30 s of backoff)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakeserver import FAKE_API_KEY, FAKE_MODEL, FakeChatServer, Reply

from memlane.core.errors import LLMResponseError, LLMTransportError
from memlane.core.llm import LLMSettings, OpenAIChatClient

SLACK_S = 1.0  # a loaded machine's scheduling
ASK = [{"role": "user", "content": "hello"}]


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as s:
        yield s


def client(server: FakeChatServer, **overrides: Any) -> OpenAIChatClient:
    """memlane's defaults (60 s an attempt, 4 retries, backoff up to 30 s), real sleeps."""
    settings = LLMSettings(model=FAKE_MODEL, api_key=FAKE_API_KEY, base_url=server.url, **overrides)
    return OpenAIChatClient(settings, rng=random.Random(3))


def timed(call: Callable[[], object], error: type[Exception]) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(error) as raised:
        call()
    return str(raised.value), time.monotonic() - started


def test_a_server_too_slow_to_answer_is_given_up_at_the_deadline(server: FakeChatServer) -> None:
    server.default_delay_s = 30.0
    llm = client(server)
    message, took = timed(lambda: llm.complete_json(ASK, deadline=time.monotonic() + 1.0), LLMTransportError)
    assert took < 1.0 + SLACK_S and "deadline" in message, (took, message)


def test_retries_and_their_backoff_fit_before_the_deadline(server: FakeChatServer) -> None:
    server.queue(*[Reply(status=503)] * 50)
    llm = client(server, backoff_base_s=0.4, max_retries=20)
    message, took = timed(lambda: llm.complete_json(ASK, deadline=time.monotonic() + 1.5), LLMTransportError)
    assert took < 1.5 + SLACK_S and "HTTP 503" in message, (took, message)
    assert 1 < server.count < 20  # it retried, and stopped for want of time, not of retries


def test_a_retry_after_past_the_deadline_is_not_waited_for(server: FakeChatServer) -> None:
    server.queue(Reply(status=429, headers={"Retry-After": "30"}))
    llm = client(server)
    message, took = timed(lambda: llm.complete_json(ASK, deadline=time.monotonic() + 5.0), LLMTransportError)
    assert took < SLACK_S and "no time for the next" in message and server.count == 1, (took, message)


def test_re_asks_after_bad_replies_stop_at_the_deadline(server: FakeChatServer) -> None:
    server.default_content = "not JSON"
    server.default_delay_s = 0.3
    llm = client(server, max_parse_retries=50)
    message, took = timed(lambda: llm.complete_json(ASK, deadline=time.monotonic() + 1.0), LLMResponseError)
    assert took < 1.0 + 0.3 + SLACK_S and "before the deadline" in message, (took, message)


def test_the_wait_for_a_request_slot_counts(server: FakeChatServer) -> None:
    server.default_delay_s = 3.0
    llm = client(server, max_concurrency=1)
    busy = threading.Thread(target=lambda: llm.complete_json(ASK))
    busy.start()
    try:
        while server.count == 0:
            time.sleep(0.01)
        message, took = timed(lambda: llm.complete_json(ASK, deadline=time.monotonic() + 0.5), LLMTransportError)
        assert took < 0.5 + SLACK_S and "request slot was busy" in message and server.count == 1, (took, message)
    finally:
        busy.join()


def test_without_a_deadline_the_client_keeps_its_own_timeouts(server: FakeChatServer) -> None:
    server.default_delay_s = 1.0
    llm = client(server, timeout_s=5.0)
    assert llm.complete_json(ASK).parsed == {"answer": "ok"}
