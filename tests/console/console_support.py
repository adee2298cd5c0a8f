"""Shared by the console's tests: the HTTP service on a real loopback port (uvicorn on a thread) over a
SQLite store, seeded through the API itself, and a Chromium driven by Playwright."""

from __future__ import annotations

import json
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
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app

ADMIN_KEY = "console-admin-key-0123456789"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
BROWSER_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]  # fmt: skip
# A block whose extraction fails for good: the scripted LLM answers it with text that is not JSON.
FAILING_TEXT = "This exchange makes the extractor fail"


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


def start_console(folder: Path) -> Console:
    log = CallLog(folder / "console.calls.db")
    memory = Memory(
        SqliteStore(folder / "console.db", durability="normal"),
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
