"""Fixtures of the HTTP tests (helpers live in http_support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_memory_support import api, llm_api, sqlite_api  # noqa: F401  (the Agent Memory routes' fixtures)
from http_support import (  # noqa: F401  (a store for server processes, a fake LLM server)
    Service,
    fake_llm,
    make_service,
    shared_store,
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = make_service(tmp_path)
    yield svc
    svc.close()
