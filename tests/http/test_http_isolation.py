"""Randomized cross-user attempts through every route: a user's key reaches only that user's memories.

Each user's texts carry a word no one else uses. Attackers replay other users' block ids, key ids, names and
words through every route, in a seeded random order; no 2xx answer may carry another user's word or block
id, no error may carry another user's word, and every victim's memories must be intact at the end.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from http_support import Service, chat

USERS = ("ann", "ben", "cat", "dan")
ATTEMPTS = 400


@dataclass
class Tenant:
    name: str
    key: str
    key_id: str
    word: str
    blocks: list[str] = field(default_factory=list)


def setup_tenants(service: Service) -> dict[str, Tenant]:
    tenants: dict[str, Tenant] = {}
    for i, name in enumerate(USERS):
        key = service.new_user(name)
        word = f"secretword{i}x{random.Random(i).randrange(10**6)}"
        t = Tenant(name, key, key.split("_")[1], word)
        client = service.client(key)
        for n in range(2):
            body = {
                "messages": chat(f"My {word} number {n} is safe.", f"Your {word} is noted."),
                "conversation_id": f"conv-{name}",
                "session_id": f"sess-{name}-{n}",
                "extract": "async",
            }
            t.blocks += client.post("/v1/memories", json=body).json()["block_ids"]
        tenants[name] = t
    # One failed attempt per user's first job, so the queue holds an error naming each user.
    for job in service.memory.queue.claim("test", 100, 60.0):
        service.memory.queue.fail(job, f"boom for {job.block.user}", None, 3600.0)
    return tenants


Attempt = tuple[str, Callable[[httpx.Client], httpx.Response], int]


def attempts(other: Tenant, rng: random.Random) -> list[Attempt]:
    """(label, request, expected status) against one victim."""
    block = rng.choice(other.blocks)
    mode = rng.choice(["vector", "keyword", "hybrid"])
    conv = {"conversation_id": f"conv-{other.name}"}
    forged = {"Authorization": f"Bearer mlk_{other.key_id}_x"}
    sess, word = f"sess-{other.name}-{rng.randrange(2)}", other.word
    return [
        ("get other's block", lambda c: c.get(f"/v1/memories/{block}"), 404),
        ("delete other's block", lambda c: c.delete(f"/v1/memories/{block}"), 404),
        ("search other's word", lambda c: c.post("/v1/search", json={"query": other.word, "mode": mode, "k": 50}), 200),
        ("list other's session", lambda c: c.get("/v1/memories", params={"session_id": f"sess-{other.name}-0"}), 200),
        ("list other's conversation", lambda c: c.get("/v1/memories", params=conv), 200),
        ("list all", lambda c: c.get("/v1/memories", params={"limit": 1000}), 200),
        ("queue", lambda c: c.get("/v1/queue"), 200),
        ("add as other", lambda c: c.post("/v1/memories", json={"messages": chat("x"), "user": other.name}), 422),
        ("keys of other", lambda c: c.get(f"/v1/users/{other.name}/keys"), 403),
        ("new key for other", lambda c: c.post(f"/v1/users/{other.name}/keys", json={}), 403),
        ("revoke other's key", lambda c: c.delete(f"/v1/users/{other.name}/keys/{other.key_id}"), 403),
        ("delete other", lambda c: c.delete(f"/v1/users/{other.name}"), 403),
        ("list users", lambda c: c.get("/v1/users"), 403),
        ("create user", lambda c: c.post("/v1/users", json={"user": other.name}), 403),
        ("metrics", lambda c: c.get("/metrics"), 403),
        ("other's key id as key", lambda c: c.get("/v1/memories", headers=forged), 401),
        ("update other's block", lambda c: c.patch(f"/v1/memories/{block}", json={"content": "x"}), 404),
        ("put other's block", lambda c: c.put(f"/v1/memories/{block}", json={"annotations": {"a": "b"}}), 404),
        ("status of other's block", lambda c: c.get(f"/v1/memories/{block}/status"), 404),
        ("requeue other's block", lambda c: c.post(f"/v1/memories/{block}/requeue"), 404),
        ("ttl of other's block", lambda c: c.post("/v1/memories/ttl", json={"ttl_s": 1, "block_ids": [block]}), 200),
        ("ttl of other's session", lambda c: c.post("/v1/memories/ttl", json={"ttl_s": 1, "session_id": sess}), 404),
        ("search other's block id", lambda c: c.post("/v1/search", json={"query": word, "block_ids": [block]}), 200),
        ("search other's session", lambda c: c.post("/v1/search", json={"query": word, "sessions": [sess]}), 200),
        ("browse other's block id", lambda c: c.post("/v1/browse", json={"block_ids": [block]}), 200),
        ("browse other's session", lambda c: c.post("/v1/browse", json={"sessions": [sess]}), 200),
        ("get other's session", lambda c: c.get(f"/v1/sessions/{sess}"), 404),
        ("update other's session", lambda c: c.patch(f"/v1/sessions/{sess}", json={"metadata": {}}), 404),
        ("end other's session", lambda c: c.post(f"/v1/sessions/{sess}/end"), 404),
        ("delete other's session", lambda c: c.delete(f"/v1/sessions/{sess}"), 404),
        ("list sessions", lambda c: c.get("/v1/sessions"), 200),
        ("get other user", lambda c: c.get(f"/v1/users/{other.name}"), 403),
        ("update other user", lambda c: c.patch(f"/v1/users/{other.name}", json={"display_name": "x"}), 403),
        ("create a prompt", lambda c: c.post("/v1/prompts", json={"prompt_id": "p", "text": "x"}), 403),
    ]  # fmt: skip


def test_randomized_cross_user_attempts_leak_nothing(service: Service) -> None:
    tenants = setup_tenants(service)
    rng = random.Random(20240601)
    clients = {name: service.client(t.key) for name, t in tenants.items()}
    leaks: list[str] = []
    seen: set[str] = set()
    for _ in range(ATTEMPTS):
        me, other = (tenants[n] for n in rng.sample(USERS, 2))
        label, request, expected = rng.choice(attempts(other, rng))
        seen.add(label)
        resp = request(clients[me.name])
        where = f"{me.name} -> {other.name}: {label}"
        if resp.status_code != expected:
            leaks.append(f"{where}: status {resp.status_code}, expected {expected}: {resp.text[:200]}")
        for victim in tenants.values():
            if victim.name == me.name:
                continue
            if victim.word in resp.text:
                leaks.append(f"{where}: answer carries {victim.name}'s word")
            if resp.is_success and any(b in resp.text for b in victim.blocks):
                leaks.append(f"{where}: answer carries a block id of {victim.name}")
        if resp.is_success and label.startswith(("search", "list", "browse")):
            items = resp.json()["items"] if isinstance(resp.json(), dict) else resp.json()
            assert all(item["user"] == me.name for item in items), where
        if resp.is_success and label.startswith(("browse", "search")) and label.endswith(("block id", "session")):
            assert resp.json() in ([], {"items": [], "total": 0, "limit": 100, "offset": 0}), where
        if label.startswith("ttl") and resp.is_success:
            assert resp.json() == {"changed": 0}, where
    assert len(seen) == len(attempts(tenants["ben"], rng))  # every kind was tried
    assert leaks == []
    for t in tenants.values():  # nothing of anyone was lost or moved
        mine = service.client(t.key).get("/v1/memories", params={"limit": 1000}).json()
        assert {b["block_id"] for b in mine} >= set(t.blocks)
        assert all(b["user"] == t.name for b in mine)
        # Nor changed: the texts, the labels and the lifetimes are as written.
        assert all(t.word in b["message"] and b["expires_at"] is None and not b["annotations"] for b in mine)
        sessions = service.client(t.key).get("/v1/sessions").json()
        assert sessions["total"] == 2 and not any(s["ended"] for s in sessions["items"])
        assert service.admin.get(f"/v1/users/{t.name}/keys").json()[0]["key_id"] == t.key_id
    errors = service.client(tenants["ann"].key).get("/v1/queue").json()["last_errors"]
    assert errors and {e["user"] for e in errors} == {"ann"}
