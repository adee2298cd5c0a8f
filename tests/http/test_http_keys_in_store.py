"""A user's API keys are the store's, so every path that deletes the user revokes them (the service,
`memlane delete-user`, `Memory.delete_user`), an old key never recreates the user, and every server process
on the store (on another machine, in another folder) sees the same keys."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from http_support import ADMIN_KEY, CLI, Service, chat, wait_for_port

from memlane.core.apikeys import ApiKeys, secret_hash
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.cli.app import cli, register_all
from memlane.interfaces.cli.serve_cmds import import_key_file

register_all()


def test_memlane_delete_user_revokes_the_users_keys(service: Service) -> None:
    key = service.new_user("alice")
    alice = service.client(key)
    assert alice.post("/v1/memories", json={"messages": chat("I keep bees.")}).status_code == 201
    store = str(service.memory.store.path)  # type: ignore[attr-defined]
    res = CliRunner().invoke(cli, ["delete-user", "alice"], env={"MEMLANE_STORE": store, "MEMLANE_EMBEDDER": "hashing"})
    assert res.exit_code == 0, res.output
    # The old key is dead at once, and an add with it does not bring alice back.
    assert alice.post("/v1/memories", json={"messages": chat("Still here?")}).status_code == 401
    assert alice.get("/v1/memories").status_code == 401
    assert service.admin.get("/v1/users").json() == []


def test_memory_delete_user_revokes_the_users_keys(service: Service) -> None:
    key = service.new_user("alice")
    service.memory.delete_user("alice")  # the Python API, behind the service's back
    assert service.client(key).post("/v1/memories", json={"messages": chat("Hello?")}).status_code == 401
    assert service.admin.get("/v1/users").json() == []


def serve(store: str, folder: Path, stack: ExitStack) -> Callable[[str], httpx.Client]:
    """`memlane serve` on the store, started in ``folder`` (as on a machine of its own); returns a maker of
    clients with a given key. The process is killed when ``stack`` closes."""
    folder.mkdir()
    env = {**os.environ, "MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": store, "MEMLANE_EMBEDDER": "hashing"}
    args = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0"]
    proc = subprocess.Popen(args, env=env, cwd=folder, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    stack.callback(lambda: (proc.kill(), proc.wait()))
    port = wait_for_port(proc, [])

    def client(key: str) -> httpx.Client:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=20)
        return stack.enter_context(http)

    return client


def test_a_second_server_process_sees_the_keys_of_the_first(shared_store: str, tmp_path: Path) -> None:
    with ExitStack() as stack:
        first = serve(shared_store, tmp_path / "machine-1", stack)
        second = serve(shared_store, tmp_path / "machine-2", stack)
        assert first(ADMIN_KEY).post("/v1/users", json={"user": "alice"}).status_code == 201
        key = first(ADMIN_KEY).post("/v1/users/alice/keys", json={}).json()["key"]
        added = second(key).post("/v1/memories", json={"messages": chat("I keep bees.")})
        assert added.status_code == 201, added.text
        assert len(first(key).get("/v1/memories").json()) == 2
        assert second(ADMIN_KEY).delete("/v1/users/alice").json()["keys_deleted"] == 1
        assert first(key).post("/v1/memories", json={"messages": chat("Back?")}).status_code == 401
        assert first(ADMIN_KEY).get("/v1/users").json() == []


def old_key_file(path: Path, rows: list[tuple[str, str, str]]) -> None:
    """A key file as `memlane serve --keys` kept it before keys moved into the store."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE http_api_keys(key_id TEXT PRIMARY KEY, user TEXT NOT NULL, secret_sha256 TEXT NOT NULL, "
            "label TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL)"
        )
        for key_id, user, secret in rows:
            db.execute("INSERT INTO http_api_keys VALUES (?, ?, ?, 'old', 0)", (key_id, user, secret_hash(secret)))


def test_an_old_key_file_is_imported_once(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "store.db"), HashingEmbedder())
    mem.create_user("alice")
    keys_file = tmp_path / "memlane.keys.db"
    old_key_file(keys_file, [("aaaaaaaaaaaa", "alice", "secret-a"), ("bbbbbbbbbbbb", "ghost", "secret-b")])
    import_key_file(mem, str(tmp_path / "store.db"), keys_file)
    keys = ApiKeys(mem.store)
    assert keys.verify("mlk_aaaaaaaaaaaa_secret-a") is not None
    assert keys.verify("mlk_bbbbbbbbbbbb_secret-b") is None  # its user is gone: not imported
    assert not keys_file.exists() and (tmp_path / "memlane.keys.db.imported").is_file()
    assert keys.revoke("alice", "aaaaaaaaaaaa")
    import_key_file(mem, str(tmp_path / "store.db"), keys_file)  # the next start: nothing comes back
    assert keys.verify("mlk_aaaaaaaaaaaa_secret-a") is None
    with pytest.raises(NotFoundError, match="no key file"):
        import_key_file(mem, str(tmp_path / "store.db"), tmp_path / "typo.db")
    mem.close()
