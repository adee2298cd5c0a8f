"""Fixtures of the console's tests (helpers live in console_support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import BROWSER_FLAGS, CHROMIUM, DESKTOP, Console, Tab, start_console


@pytest.fixture
def console(tmp_path: Path) -> Iterator[Console]:
    running = start_console(tmp_path)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium (Debian's package chromium): the browser test needs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (make venv installs it)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def tab(browser: Any, console: Console) -> Iterator[Tab]:
    context = browser.new_context(viewport=DESKTOP)
    t = Tab(context.new_page(), console)
    yield t
    context.close()
    assert t.errors == []
