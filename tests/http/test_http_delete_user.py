"""Deleting a user over HTTP leaves nothing of theirs: not in any table of the store (blocks, facts, vectors,
keyword index, jobs, embedding cache), nor in the LLM call log, nor among the API keys."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from http_support import Service, chat

MARKER = "quokkazanzibar"  # a word only alice ever says
# The keyword index's vocabulary (table terms) holds each word once for all users: a word no remaining key
# holds must go with the last key that held it, or a deleted user's words would linger there.


def cells_containing(db: Path, needle: str) -> list[str]:
    """Every table.column of ``db`` with a value (text or bytes) that contains ``needle``."""
    found: list[str] = []
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cur = conn.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cur.description]
            for row in cur:
                for name, value in zip(names, row, strict=True):
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    if needle in text:
                        found.append(f"{table}.{name}")
    return found


def files_holding(folder: Path, needle: str) -> list[str]:
    """Every file in ``folder`` whose bytes hold ``needle`` (the store, the call log, their -wal and -shm)."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and needle.encode() in p.read_bytes())


def test_delete_user_leaves_nothing_of_them(service: Service) -> None:
    alice_key, bob_key = service.new_user("alice"), service.new_user("bob")
    service.admin.post("/v1/users/alice/keys", json={"label": "second key"})
    alice, bob = service.client(alice_key), service.client(bob_key)
    said = chat(f"My {MARKER} plays the oboe.", f"A {MARKER} with an oboe!")
    alice.post("/v1/memories", json={"messages": said, "extract": "sync"})  # facts, summaries, LLM calls
    alice.post("/v1/memories", json={"messages": chat(f"Queued {MARKER} news."), "extract": "async"})  # open jobs
    bob.post("/v1/memories", json={"messages": chat("Bob likes tea.", "Tea is nice."), "extract": "sync"})
    store_path = service.memory.store.path  # type: ignore[attr-defined]
    assert cells_containing(store_path, MARKER)  # the check sees her data before the delete
    alice_hashes = {b.content_hash for b in service.memory.list("alice")}

    resp = service.admin.delete("/v1/users/alice")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"user": "alice", "blocks_deleted": 4, "keys_deleted": 2}

    assert service.memory.store.user_row_counts("alice") == {
        "blocks": 0,
        "search_keys": 0,
        "key_segments": 0,
        "jobs": 0,
        "api_keys": 0,
        "ann_index": 0,
        "key_vectors": 0,
        "key_terms": 0,
        "retention_policies": 0,
        "sessions": 0,
        "users": 0,
    }
    with sqlite3.connect(store_path) as db:
        assert db.execute("SELECT count(*) FROM api_keys").fetchone() == (1,)  # bob's only
        cached = {r[0] for r in db.execute("SELECT hash FROM embed_cache")}
        assert not alice_hashes & cached
        assert db.execute("SELECT count(*) FROM terms WHERE term LIKE 'quokka%'").fetchone() == (0,)
    assert cells_containing(store_path, MARKER) == []
    assert {r.namespace for r in service.call_log.list(1000)} == {"bob"}
    assert cells_containing(service.call_log.path, MARKER) == []
    # Nor in the bytes of any file beside the store, the write-ahead logs included, while it is open.
    assert files_holding(store_path.parent, MARKER) == []

    # Her keys are dead, bob is untouched, and the name is free again.
    assert alice.get("/v1/memories").status_code == 401
    assert [h["message"] for h in bob.post("/v1/search", json={"query": "tea"}).json()][:1] == [
        "user: Bob likes tea.\nassistant: Tea is nice."
    ]
    assert service.admin.get("/v1/users").json()[0]["user"] == "bob"
    assert service.admin.delete("/v1/users/alice").status_code == 404


def test_the_keyword_index_keeps_no_bytes_of_a_deleted_user(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    alice.post("/v1/memories", json={"messages": chat(f"My {MARKER} plays the oboe.")})
    assert service.admin.delete("/v1/users/alice").status_code == 200
    assert cells_containing(service.memory.store.path, MARKER) == []  # type: ignore[attr-defined]
