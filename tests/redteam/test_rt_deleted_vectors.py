"""Reading a forgotten sentence back from the approximate index's files. A user large enough to be searched
through an HNSW index (here every user is) stores a secret, then deletes it (or corrects it, or its
session or the whole user goes) over HTTP, /v1 and the Agent Memory API alike. The attacker, who can read
the store's folder (a backup, a disk image), compares every float32 and int8 run of every file with the
secret's embedding: before the fix, the index file gave it back at cosine 1.000. Now no file does once
the request is answered."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from http_support import ADMIN_KEY, TEST_HOSTS, Service
from sync_asgi import SyncASGITransport
from vector_scan import DIM, files_with_vector

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog
from memlane.core.memory import Memory
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

SECRET = "My bank PIN is four nine one seven, don't tell anyone."
OTHERS = [f"Reminder {i}: water the {w} on day {i % 5}." for i, w in enumerate(["fern", "cactus", "palm"] * 50)]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    log = CallLog(tmp_path / "svc.calls.db")
    store = SqliteStore(tmp_path / "svc.db", ann=AnnSettings(threshold=0, background=False))
    memory = Memory(store, HashingEmbedder(DIM), call_log=log)
    app = create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS))
    svc = Service(app, memory, log, SyncASGITransport(app))
    yield svc
    svc.close()


def seeded(svc: Service) -> tuple[httpx.Client, str]:
    """Alice's key, and the block of her secret, in a session of its own beside her other facts; her index
    is built with them (by a search) and saved."""
    key = svc.new_user("alice")
    alice = svc.client(key)
    assert alice.post("/v1/facts", json={"facts": OTHERS, "session_id": "chores"}).status_code == 201
    secret = alice.post("/v1/facts", json={"facts": [SECRET], "session_id": "private"}).json()["block_ids"][0]
    assert alice.post("/v1/search", json={"query": "water the fern", "mode": "vector"}).status_code == 200
    return alice, secret


FORGET: dict[str, Callable[[Service, httpx.Client, str], httpx.Response]] = {
    "/v1 delete": lambda svc, c, b: c.delete(f"/v1/memories/{b}"),
    "/v1 update": lambda svc, c, b: c.patch(f"/v1/memories/{b}", json={"content": "I changed my PIN."}),
    "/v1 session delete": lambda svc, c, b: c.delete("/v1/sessions/private"),
    "/v1 user delete": lambda svc, c, b: svc.admin.delete("/v1/users/alice"),
    "Agent Memory delete": lambda svc, c, b: c.request(
        "DELETE", "/users/alice/sessions/private/memory", json={"block_ids": [b]}
    ),
    "Agent Memory delete all": lambda svc, c, b: c.request(
        "DELETE", "/users/alice/sessions/private/memory", json={"block_ids": "all"}
    ),
    "Agent Memory update": lambda svc, c, b: c.put(
        f"/users/alice/sessions/private/memory/{b}", json={"fact": "I changed my PIN."}
    ),
    "Agent Memory session delete": lambda svc, c, b: c.delete("/users/alice/sessions/private"),
    "Agent Memory user delete": lambda svc, c, b: svc.admin.delete("/users/alice"),
}


@pytest.mark.parametrize("how", list(FORGET))
def test_a_forgotten_secret_cannot_be_read_back_from_the_index(service: Service, tmp_path: Path, how: str) -> None:
    alice, secret = seeded(service)
    index_files = [n for n in files_with_vector(tmp_path, SECRET) if n.endswith(".hnsw")]
    assert index_files, "the attack reads nothing: the index does not hold the secret yet"
    resp = FORGET[how](service, alice, secret)
    assert resp.status_code < 300, resp.text
    assert files_with_vector(tmp_path, SECRET) == []
