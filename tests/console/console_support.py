"""Shared by the console's tests: the HTTP service on a real loopback port (uvicorn on a thread) over a
SQLite store, seeded through the API itself, and a Chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app

ADMIN_KEY = "console-admin-key-0123456789"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
BROWSER_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]  # fmt: skip
# A block whose extraction fails for good: the scripted LLM answers it with text that is not JSON.
FAILING_TEXT = "This exchange makes the extractor fail"
SHOTS = os.environ.get("MEMLANE_CONSOLE_SHOTS")
DESKTOP = {"width": 1280, "height": 900}


def extraction_reply(messages: Sequence[ChatMessage]) -> str:
    """Summary and a fact from the exchange's first line; not JSON at all for FAILING_TEXT."""
    text = messages[-1]["content"]
    if FAILING_TEXT in text:
        return "no JSON here"
    first = text.splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Console:
    """A running service: its base URL, its memory, and the user keys made for the tests."""

    base: str
    memory: Memory
    server: uvicorn.Server
    thread: threading.Thread
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def ui(self) -> str:
        return f"{self.base}/ui/"

    def client(self, key: str | None = ADMIN_KEY) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30)

    def new_user(self, name: str) -> str:
        with self.client() as admin:
            assert admin.post("/v1/users", json={"user": name}).status_code in (200, 201)
            made = admin.post(f"/v1/users/{name}/keys", json={"label": "tests"})
            assert made.status_code == 201, made.text
        self.keys[name] = str(made.json()["key"])
        return self.keys[name]

    def add(self, user: str, lines: Sequence[str], **body: Any) -> list[str]:
        """Adds alternating user/assistant messages as ``user``; returns the block ids."""
        messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]
        with self.client(self.keys[user]) as c:
            res = c.post("/v1/memories", json={"messages": messages, **body})
            assert res.status_code == 201, res.text
        return list(res.json()["block_ids"])

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.memory.close()


def start_console(folder: Path, store: Store | None = None) -> Console:
    """The service over ``store`` (by default a SQLite store in ``folder``) on a free loopback port."""
    log = CallLog(folder / "console.calls.db")
    memory = Memory(
        store or SqliteStore(folder / "console.db", durability="normal"),
        HashingEmbedder(),
        llm=ScriptedLLM(extraction_reply, call_log=log),
        call_log=log,
    )
    app = create_app(memory, admin_key=ADMIN_KEY)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="console-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("the console's server did not start")
        time.sleep(0.05)
    return Console(base=f"http://127.0.0.1:{port}", memory=memory, server=server, thread=thread)


class Tab:
    """One browser tab on the console, with the checks every page gets."""

    def __init__(self, page: Any, console: Console) -> None:
        self.page = page
        self.console = console
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # A refused request is logged by the browser itself; the tests check that the page says why.
        if message.type == "error" and not message.text.startswith("Failed to load resource: the server responded"):
            self.errors.append(f"console {message.type}: {message.text}")

    def open(self, hash_: str = "") -> None:
        self.page.goto(self.console.ui + hash_)
        self.ready()

    def ready(self) -> None:
        self.page.wait_for_selector("body[data-ready=true]", timeout=20_000)

    def go(self, hash_: str) -> None:
        """Follows an in-console address, as a click on a link does."""
        self.page.evaluate(
            """h => {
                 document.body.dataset.ready = 'false';
                 if (location.hash === h) window.dispatchEvent(new HashChangeEvent('hashchange'));
                 else location.hash = h;
               }""",
            hash_,
        )
        self.ready()

    def click(self, selector: str) -> None:
        self.page.evaluate("() => { document.body.dataset.ready = 'false'; }")
        self.page.click(selector)
        self.ready()

    def sign_in(self, key: str) -> None:
        self.open("#/signin")
        self.page.fill("[data-testid=key]", key)
        self.page.press("[data-testid=key]", "Enter")  # the keyboard is enough
        self.page.wait_for_selector("[data-testid=signed-in-as]")
        self.ready()

    def said(self, words: str, testid: str = "action-ok") -> str:
        """Waits for the page to report an action's outcome holding ``words`` (an earlier report of the same
        kind may still be on the page), and returns the report."""
        selector = f"[data-testid={testid}]:has-text({json.dumps(words)})"
        self.page.wait_for_selector(selector)
        return self.text(selector)

    def text(self, selector: str) -> str:
        return str(self.page.inner_text(selector))

    def testids(self, testid: str, attribute: str) -> list[str]:
        return [str(x) for x in self.page.eval_on_selector_all(
            f"[data-testid={testid}]", f"els => els.map(e => e.getAttribute('{attribute}'))")]  # fmt: skip

    def accessible(self, name: str) -> None:
        """No serious or critical axe-core violation on the page as it is now; its screenshot when asked."""
        if not self.page.evaluate("typeof axe !== 'undefined'"):
            self.page.evaluate(AXE.read_text(encoding="utf-8"))  # DevTools evaluation: the CSP does not apply
        found = self.page.evaluate(
            """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target.join(' ')).join(', ')}`)"""
        )
        assert found == [], f"{name}: {found}"
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SHOTS) / f"console-{name}.png"), full_page=True)


def exchange_firsts(blocks: Sequence[dict[str, Any]]) -> list[str]:
    """The ids the console lists for ``blocks``: one row per exchange (its first block; the other perspectives
    are folded into it) and one per fact."""
    seen: set[tuple[Any, ...]] = set()
    out: list[str] = []
    for b in blocks:
        key = None if b.get("kind") == "fact" else tuple(b[k] for k in EXCHANGE_KEY)
        if key is None or key not in seen:
            out.append(str(b["block_id"]))
        if key is not None:
            seen.add(key)
    return out


EXCHANGE_KEY = ("conversation_id", "session_id", "exchange_index", "ingest_time", "content_hash")
