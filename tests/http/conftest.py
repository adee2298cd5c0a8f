"""Fixtures of the HTTP tests (helpers live in http_support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from http_support import Service, make_service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = make_service(tmp_path)
    yield svc
    svc.close()
