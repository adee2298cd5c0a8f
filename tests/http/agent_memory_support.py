"""Shared by the Agent Memory route tests: the app in process over each store (SQLite; PostgreSQL and the
Citus cluster when their servers are configured), with or without a scripted LLM, and clients that speak
to it as that API's clients do (JSON, a bearer token, ids in the path)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from http_support import ADMIN_KEY, BASE_URL, MAX_BODY, TEST_HOSTS, extraction_reply
from sync_asgi import SyncASGITransport

from memlane.core.apikeys import ApiKeys
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

StoreFactory = Callable[[], Store]


@dataclass
class AgentApi:
    """The service, its memory, and clients with the admin key, a user's key, or none."""

    app: FastAPI
    memory: Memory
    transport: SyncASGITransport
    keys: dict[str, str] = field(default_factory=dict)

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        h = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        if token:
            h["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=BASE_URL, transport=self.transport, headers=h)

    @property
    def admin(self) -> httpx.Client:
        return self.client(ADMIN_KEY)

    def user_key(self, user: str, role: str = "read-write") -> str:
        """A key of ``user`` (created with a display name if missing) with ``role``."""
        if not any(u.name == user for u in self.memory.users()):
            self.memory.create_user(user, display_name=user.title())
        return ApiKeys(self.memory.store).create(user, "test", role).key

    def session(self, user: str, session_id: str, **body: Any) -> dict[str, Any]:
        """Create ``user`` (if missing) and the session through the routes; the session's answer."""
        self.admin.post("/users", json={"user_id": user, "name": user.title()})
        resp = self.admin.post(f"/users/{user}/sessions", json={"session_id": session_id, **body})
        assert resp.status_code == 201, resp.text
        return dict(resp.json())

    def close(self) -> None:
        self.transport.shutdown()
        self.memory.close()


def make_api(store: Store, *, llm: bool = False, **settings: Any) -> AgentApi:
    memory = Memory(store, HashingEmbedder(), llm=ScriptedLLM(extraction_reply) if llm else None)
    settings.setdefault("max_body_bytes", MAX_BODY)
    settings.setdefault("allowed_hosts", TEST_HOSTS)
    app = create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(**settings))
    return AgentApi(app, memory, SyncASGITransport(app))


@pytest.fixture
def api(store_factory: StoreFactory) -> Iterator[AgentApi]:
    """The routes over each store, without an LLM (blocks are stored ready, unextracted)."""
    made = make_api(store_factory())
    yield made
    made.close()


@pytest.fixture
def sqlite_api(tmp_path: Path) -> Iterator[AgentApi]:
    """The routes over a SQLite store, for what does not depend on the store."""
    from memlane.core.store.sqlite import SqliteStore

    made = make_api(SqliteStore(tmp_path / "am.db", durability="normal"))
    yield made
    made.close()


@pytest.fixture
def llm_api(tmp_path: Path) -> Iterator[AgentApi]:
    """The routes over a SQLite store with a scripted LLM: adds queue or run extraction."""
    from memlane.core.store.sqlite import SqliteStore

    made = make_api(SqliteStore(tmp_path / "am-llm.db", durability="normal"), llm=True)
    yield made
    made.close()


def flat_error(resp: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """The answer's flat error body, checked: the status, a string code, a message, details, request id."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert set(body) == {"error", "message", "details", "request_id"}, body
    assert isinstance(body["error"], str) and isinstance(body["message"], str) and body["message"]
    assert isinstance(body["details"], dict)
    assert body["request_id"] == resp.headers["x-request-id"]
    if code is not None:
        assert body["error"] == code, body
    return dict(body)
