"""Through the HTTP app, in process, on every backend: POST /v1/memories with a user's key while
DELETE /v1/users/{user} runs. Adds in flight either landed first (201, then deleted with the user) or are
refused (409, or 401 if their key was checked after the delete); once the delete has returned, the key is
dead (401) and nothing of the user is left; the name made again starts empty."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from http_support import ADMIN_KEY, BASE_URL, TEST_HOSTS, chat
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.protocol import Vectors
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

StoreFactory = Callable[[], Store]
ROUNDS = 15
ADDERS = 3


class SlowEmbedder(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> Vectors:
        time.sleep(0.004)  # about MiniLM's time for a short text: adds spend it in flight
        return super().embed(texts)


def app_over(memory: Memory) -> FastAPI:
    return create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS))


@dataclass(frozen=True)
class Answer:
    began: float
    status: int


def race_one_round(
    client: Callable[[str], httpx.Client], key: str, rnd: int, rng: random.Random
) -> tuple[list[Answer], httpx.Response, float, float]:
    """Adders post with alice's key while the admin deletes her; returns when the adders stop."""
    answers: list[Answer] = []
    lock = threading.Lock()
    stop = threading.Event()

    def adder(k: int) -> None:
        with client(key) as http:
            i = 0
            while not stop.is_set():
                began = time.monotonic()
                resp = http.post("/v1/memories", json={"messages": chat(f"round {rnd} adder {k} note {i}")})
                with lock:
                    answers.append(Answer(began, resp.status_code))
                i += 1

    threads = [threading.Thread(target=adder, args=(k,)) for k in range(ADDERS)]
    for t in threads:
        t.start()
    time.sleep(rng.uniform(0.01, 0.04))
    started = time.monotonic()
    deleted = client(ADMIN_KEY).delete("/v1/users/alice")
    returned = time.monotonic()
    # Until some adds began after the delete returned (a loaded machine or a distributed store may keep the
    # adds in flight then longer than a fixed pause).
    deadline = returned + 5.0
    time.sleep(0.02)
    while time.monotonic() < deadline:
        with lock:
            if sum(a.began > returned for a in answers) >= 2:
                break
        time.sleep(0.005)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return answers, deleted, started, returned


def test_an_add_in_flight_never_outlives_the_delete_of_its_user(store_factory: StoreFactory, tmp_path: Path) -> None:
    memory = Memory(store_factory(), SlowEmbedder())
    transport = SyncASGITransport(app_over(memory))

    def client(key: str) -> httpx.Client:
        return httpx.Client(base_url=BASE_URL, transport=transport, headers={"Authorization": f"Bearer {key}"})

    admin = client(ADMIN_KEY)
    rng = random.Random(7)
    statuses: set[int] = set()
    try:
        for rnd in range(ROUNDS):
            assert admin.post("/v1/users", json={"user": "alice"}).status_code == 201
            key = admin.post("/v1/users/alice/keys", json={}).json()["key"]
            answers, deleted, started, returned = race_one_round(client, key, rnd, rng)
            assert deleted.status_code == 200, deleted.text
            assert deleted.json()["keys_deleted"] == 1
            statuses |= {a.status for a in answers}
            # In flight: landed first (201), or refused: 409 when the key was checked before the delete
            # committed, 401 after. Never a 5xx, and never an add that survives (checked below).
            assert {a.status for a in answers if a.began < started} <= {201, 401, 409}
            # Begun after the delete returned: the key is dead, and no add recreates the user.
            after = [a for a in answers if a.began > returned]
            assert after and {a.status for a in after} == {401}
            assert "alice" not in {u["user"] for u in admin.get("/v1/users").json()}
            assert set(memory.store.user_row_counts("alice").values()) == {0}
        assert {201, 401, 409} <= statuses, f"the rounds never raced an add against the delete: {statuses}"
        # The name made again starts empty.
        assert admin.post("/v1/users", json={"user": "alice"}).status_code == 201
        fresh = admin.post("/v1/users/alice/keys", json={}).json()["key"]
        assert client(fresh).get("/v1/memories").json() == []
        assert memory.store.integrity_check() == []
    finally:
        transport.shutdown()
        memory.close()


class DeletingEmbedder(HashingEmbedder):
    """Deletes the user in the middle of the add's embedding, once: the delete lands exactly in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: Memory | None = None
        self.victim: str | None = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.memory is not None and self.victim is not None:
            victim, self.victim = self.victim, None
            self.memory.delete_user(victim)
        return super().embed(texts)


def test_an_add_whose_user_is_deleted_in_flight_is_a_409_and_the_clients_conflict_error(
    store_factory: StoreFactory,
) -> None:
    from memlane.client import Client
    from memlane.client.errors import ConflictError

    embedder = DeletingEmbedder()
    memory = Memory(store_factory(), embedder)
    embedder.memory = memory
    transport = SyncASGITransport(app_over(memory))
    try:
        with Client(BASE_URL, ADMIN_KEY, transport=transport) as admin:
            admin.create_user("alice")
            key = admin.create_key("alice").key
        embedder.victim = "alice"
        with httpx.Client(base_url=BASE_URL, transport=transport, headers={"Authorization": f"Bearer {key}"}) as http:
            resp = http.post("/v1/memories", json={"messages": chat("written while alice is deleted")})
        assert resp.status_code == 409 and resp.json()["error"]["code"] == "conflict"
        assert "deleted while this write was in flight" in resp.json()["error"]["message"]
        assert memory.users() == [] and set(memory.store.user_row_counts("alice").values()) == {0}
        with Client(BASE_URL, ADMIN_KEY, transport=transport) as admin:
            admin.create_user("alice")
            key = admin.create_key("alice").key
        embedder.victim = "alice"
        with Client(BASE_URL, key, transport=transport) as alice, pytest.raises(ConflictError):
            alice.add(chat("again"))
    finally:
        transport.shutdown()
        memory.close()
