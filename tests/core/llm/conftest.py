"""Fixtures for the LLM tests: a real in-process chat server, a call log in a temp folder, a client factory."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FAKE_API_KEY, FAKE_MODEL, FakeChatServer

from memlane.core.llm.calllog import CallLog
from memlane.core.llm.openai_client import OpenAIChatClient
from memlane.core.llm.settings import LLMSettings


@pytest.fixture
def fake_server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as server:
        yield server


@pytest.fixture
def call_log(tmp_path: Path) -> Iterator[CallLog]:
    with CallLog(tmp_path / "calls.sqlite") as log:
        yield log


@pytest.fixture
def sleeps() -> list[float]:
    """The durations the client asked to sleep (it never really sleeps in tests)."""
    return []


@pytest.fixture
def make_client(fake_server: FakeChatServer, sleeps: list[float]) -> Iterator[Callable[..., OpenAIChatClient]]:
    """Build clients aimed at the fake server; keyword arguments override settings or client options."""
    clients: list[OpenAIChatClient] = []

    def make(*, call_log: CallLog | None = None, use_cache: bool = True, **overrides: Any) -> OpenAIChatClient:
        values: dict[str, Any] = {
            "model": FAKE_MODEL,
            "api_key": FAKE_API_KEY,
            "base_url": fake_server.url,
            "timeout_s": 2.0,
            "max_retries": 3,
            "max_parse_retries": 2,
            "backoff_base_s": 0.5,
            "backoff_cap_s": 8.0,
        }
        values.update(overrides)
        client = OpenAIChatClient(
            LLMSettings(**values),
            call_log=call_log,
            sleep=sleeps.append,
            rng=random.Random(7),
            use_cache=use_cache,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
