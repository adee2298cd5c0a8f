"""The HTTP service over a store sharded on two PostgreSQL servers: a user frozen by a move is answered 503
with the reason (nothing written, retry), and is served again once the move finished."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import httpx
import pytest
from http_support import ADMIN_KEY, BASE_URL, TEST_HOSTS, chat
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.postgres.moves import freeze, move_user
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.sharded import ShardedStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

pytestmark = pytest.mark.postgres


@pytest.fixture
def sharded() -> Iterator[ShardedStore]:
    urls = [os.environ.get("MEMLANE_TEST_POSTGRES_URL"), os.environ.get("MEMLANE_TEST_POSTGRES_URL_2")]
    if not all(urls):
        pytest.skip("needs two PostgreSQL servers: MEMLANE_TEST_POSTGRES_URL and MEMLANE_TEST_POSTGRES_URL_2")
    given = [u for u in urls if u]
    schema = f"test_{uuid.uuid4().hex[:16]}"
    store = ShardedStore(given, schema=schema, pool_max=4)
    yield store
    store.close()
    for url in given:
        drop_schema(url, schema)


def test_a_user_being_moved_gets_503_with_the_reason_then_is_served(sharded: ShardedStore) -> None:
    memory = Memory(sharded, HashingEmbedder())
    app = create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS))
    transport = SyncASGITransport(app)
    admin = httpx.Client(base_url=BASE_URL, transport=transport, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert admin.post("/v1/users", json={"user": "alice"}).status_code == 201
    key = admin.post("/v1/users/alice/keys", json={}).json()["key"]
    alice = httpx.Client(base_url=BASE_URL, transport=transport, headers={"Authorization": f"Bearer {key}"})
    assert alice.post("/v1/memories", json={"messages": chat("I grow tomatoes")}).status_code == 201
    source = sharded.shard_of("alice")
    target = 1 - source
    freeze(sharded.shards[source], "alice", target)
    resp = alice.post("/v1/memories", json={"messages": chat("written during the move")})
    assert resp.status_code == 503
    assert "being moved" in resp.json()["error"]["message"]
    assert alice.get("/v1/memories").status_code == 200  # reads go on
    move_user(sharded, "alice", target, drain_s=0.0)  # finishes the move
    assert alice.post("/v1/memories", json={"messages": chat("after the move")}).status_code == 201
    # a user on the other shard: the admin list shows both
    bob = next(f"bob-{i}" for i in range(100) if sharded.home(f"bob-{i}") == source)
    assert admin.post("/v1/users", json={"user": bob}).status_code == 201
    assert sharded.shards[source].has_user(bob)
    assert [u["user"] for u in admin.get("/v1/users").json()] == ["alice", bob]
    assert sharded.shards[target].has_user("alice") and not sharded.shards[source].has_user("alice")
    assert len(memory.list("alice")) == 4  # two adds of two blocks each
