"""Fixtures of the console's tests (helpers live in console_support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from console_support import Console, start_console


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    running = start_console(tmp_path)
    yield running
    running.stop()
