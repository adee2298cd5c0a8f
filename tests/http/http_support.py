"""Shared by the HTTP tests: the app in process over a real SQLite store, with a scripted LLM and its call
log, and httpx clients that reach it through an in-process ASGI transport."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from psycopg import sql
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings
from memlane.interfaces.wire.hosts import allowed_hosts

ADMIN_KEY = "admin-key-for-tests-0123456789"
# `python -c CLI serve ...` runs the memlane command with the service commands registered, until
# `register_all` registers them itself.
CLI = (
    "from memlane.interfaces.cli.app import cli, register_all\n"
    "from memlane.interfaces.cli.serve_cmds import register\n"
    "register_all()\n"
    "'serve' in cli.commands or register(cli)\n"
    "cli()\n"
)
STARTED = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
BASE_URL = "http://memlane.test"
# The service is configured with the names its tests call it by (schemathesis's ASGI client: testserver).
TEST_HOSTS = allowed_hosts(["memlane.test", "testserver"])
MAX_BODY = 64 * 1024


def extraction_reply(messages: Sequence[ChatMessage]) -> str:
    """A deterministic extraction: the summary and a fact repeat the exchange's first line."""
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def chat(*lines: str) -> list[dict[str, str]]:
    """Alternating user/assistant messages."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


@dataclass
class Service:
    """The app, its memory and call log, and an in-process transport shared by every client."""

    app: FastAPI
    memory: Memory
    call_log: CallLog
    transport: SyncASGITransport

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=BASE_URL, transport=self.transport, headers=headers)

    @property
    def admin(self) -> httpx.Client:
        return self.client(ADMIN_KEY)

    def new_user(self, name: str) -> str:
        """Create ``name`` and return a key of theirs."""
        admin = self.admin
        assert admin.post("/v1/users", json={"user": name}).status_code in (200, 201)
        resp = admin.post(f"/v1/users/{name}/keys", json={"label": "test"})
        assert resp.status_code == 201, resp.text
        return str(resp.json()["key"])

    def close(self) -> None:
        self.transport.shutdown()
        self.memory.close()
        self.call_log.close()


def make_service(folder: Path, name: str = "http", **app_kwargs: Any) -> Service:
    log = CallLog(folder / f"{name}.calls.db")
    memory = Memory(
        SqliteStore(folder / f"{name}.db", durability="normal"),
        HashingEmbedder(),
        llm=ScriptedLLM(extraction_reply, call_log=log),
        call_log=log,
    )
    app_kwargs.setdefault("settings", HttpSettings(max_body_bytes=MAX_BODY, allowed_hosts=TEST_HOSTS))
    app = create_app(memory, admin_key=ADMIN_KEY, **app_kwargs)
    return Service(app, memory, log, SyncASGITransport(app))


def wait_for_port(proc: subprocess.Popen[str], lines: list[str], timeout_s: float = 30.0) -> int:
    """Read a uvicorn server's log (stderr) until it says where it listens; keep reading into ``lines``."""
    found: list[int] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            m = STARTED.search(line)
            if m:
                found.append(int(m.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(timeout_s)
    if not found:
        proc.kill()
        raise AssertionError("server did not start:\n" + "".join(lines))
    return found[0]


BackendClients = tuple[httpx.Client, httpx.Client, httpx.Client]


@contextmanager
def backend_clients(store: Store, users: Mapping[str, Mapping[str, Any]]) -> Iterator[BackendClients]:
    """The admin's client and the first two of ``users``' (name: the rest of its create body) over one
    app on ``store``, closed after."""
    memory = Memory(store, HashingEmbedder())
    transport = SyncASGITransport(
        create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS))
    )

    def client(key: str) -> httpx.Client:
        return httpx.Client(base_url=BASE_URL, transport=transport, headers={"Authorization": f"Bearer {key}"})

    admin = client(ADMIN_KEY)
    keys = []
    for name, body in users.items():
        assert admin.post("/v1/users", json={"user": name, **body}).status_code == 201
        keys.append(admin.post(f"/v1/users/{name}/keys", json={}).json()["key"])
    try:
        yield admin, client(keys[0]), client(keys[1])
    finally:
        transport.shutdown()
        memory.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store two server processes open: a SQLite file, or a fresh schema named by the URL alone."""
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
        return
    url = os.environ.get("MEMLANE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("needs a PostgreSQL server: set MEMLANE_TEST_POSTGRES_URL (.ci/postgres.sh starts one)")
    schema = f"test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    drop_schema(url, schema)


# The fake OpenAI-compatible server lives with the LLM tests; appended, so its folder shadows nothing here.
LLM_TESTS = Path(__file__).resolve().parents[1] / "core" / "llm"
if str(LLM_TESTS) not in sys.path:
    sys.path.append(str(LLM_TESTS))
fakeserver = importlib.import_module("fakeserver")


@pytest.fixture
def fake_llm() -> Iterator[Any]:
    """An OpenAI-compatible chat server on loopback (``tests/core/llm/fakeserver.py``) that extracts every
    block as :func:`extraction_reply` does."""
    with fakeserver.FakeChatServer() as server:
        server.responder = lambda body: extraction_reply(body["messages"])
        yield server
