"""A store damaged in the middle of its file, a full disk, a store that cannot take writes: `memlane check`
finds the damage (exit 1), the health check reports `corrupt` (on its schedule, or at once after a request
hit the damage), a write that hits it says so instead of "retry", and every write 503 says why."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from http_support import ADMIN_KEY, TEST_HOSTS, Service, chat
from redteam_support import CLI, STARTED
from sync_asgi import SyncASGITransport

from memlane.core.apikeys import ApiKeys
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import StoreError
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.sqlite import base as sqlite_store
from memlane.interfaces.cli.app import cli, register_all
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

register_all()
USERS = [f"user{i}" for i in range(6)]


def filled_store(path: Path) -> None:
    """A store of a few MB: blocks of six users, spread over many pages."""
    mem = Memory(SqliteStore(path), HashingEmbedder())
    for i in range(240):
        text = f"exchange {i} about the garden, the bees and the weather " * 6
        mem.add(USERS[i % len(USERS)], chat(text, f"reply {i}"), session_id=f"s{i % 9}")
    mem.close()


def corrupt_the_middle(path: Path) -> int:
    """Overwrite the page of table ``blocks`` nearest the middle of the file with garbage; its number."""
    with sqlite3.connect(path) as db:
        pages = [int(r[0]) for r in db.execute("SELECT pageno FROM dbstat WHERE name = 'blocks'")]
        size = int(db.execute("PRAGMA page_size").fetchone()[0])
        count = int(db.execute("PRAGMA page_count").fetchone()[0])
    page = min(pages, key=lambda p: abs(p - count // 2))
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(os.urandom(size))
    return page


def service_over(memory: Memory, **settings: Any) -> Service:
    options: dict[str, Any] = {"allowed_hosts": TEST_HOSTS, "health_check_every_s": 0.0}
    app = create_app(memory, admin_key=ADMIN_KEY, settings=HttpSettings(**(options | settings)))
    return Service(app, memory, None, SyncASGITransport(app))  # type: ignore[arg-type]


def run(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, env=env)
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    path = tmp_path / "damaged.db"
    filled_store(path)
    corrupt_the_middle(path)
    return path


# -- memlane check ------------------------------------------------------------------------------------------


def test_check_says_ok_finds_damage_and_exits_3_without_a_store(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    filled_store(path)
    env = {"MEMLANE_STORE": str(path)}
    code, out, err = run(["check"], env)
    assert code == 0 and out.startswith(f"store {path}: ok\n") and "integrity_check" in out, err
    corrupt_the_middle(path)
    code, out, err = run(["check"], env)
    assert code == 1 and "problem found" in out and "malformed" in out, (out, err)
    code, out, _ = run(["check", "--json"], env)
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["problems"] and report["call_log"] is None
    code, _, err = run(["check", "--store", str(tmp_path / "nothing.db")], env)
    assert code == 3 and "no store" in err


def test_check_covers_the_call_log_beside_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    filled_store(path)
    from memlane.core.llm import CallLog

    CallLog(tmp_path / "s.db.calls.db").close()
    code, out, _ = run(["check", "--json"], {"MEMLANE_STORE": str(path)})
    assert code == 0 and json.loads(out)["call_log"]["ok"] is True


# -- the HTTP service ---------------------------------------------------------------------------------------


def health(svc: Service) -> tuple[int, dict[str, Any]]:
    resp = svc.client().get("/healthz")
    return resp.status_code, resp.json()


def test_health_finds_the_damage_the_write_probe_misses(damaged: Path) -> None:
    mem = Memory(SqliteStore(damaged), HashingEmbedder())
    svc = service_over(mem)
    try:
        assert health(svc)[0] == 200  # the probe's row lands on a sound page: not enough
        svc.app.state.services.integrity.run_once()  # what the schedule runs
        status, body = health(svc)
        assert status == 503 and body["store"]["detail"]["reason"] == "corrupt", body
        assert body["store"]["detail"]["integrity"]["corrupt"] is True
        assert "blocks" not in json.dumps(body) and str(damaged) not in json.dumps(body)
    finally:
        svc.transport.shutdown()
        mem.close()


def test_a_write_that_hits_the_damage_says_so_and_health_knows_at_once(damaged: Path) -> None:
    mem = Memory(SqliteStore(damaged), HashingEmbedder())
    svc = service_over(mem)
    try:
        answers = [svc.admin.delete(f"/v1/users/{user}") for user in USERS]
        failed = [r for r in answers if r.status_code != 200]
        assert failed, "no delete touched the damaged page"
        for resp in failed:
            error = resp.json()["error"]
            assert resp.status_code == 503 and error["code"] == "store_corrupt", resp.text
            assert "retrying will not help" in error["message"] and "memlane check" in error["message"]
            assert str(damaged) not in resp.text
        status, body = health(svc)  # no scheduled check ran: the request told it
        assert status == 503 and body["store"]["detail"]["reason"] == "corrupt"
        assert body["store"]["detail"]["integrity"]["source"] == "request"
    finally:
        svc.transport.shutdown()
        mem.close()


def test_the_integrity_check_runs_on_a_schedule_from_the_start(damaged: Path) -> None:
    mem = Memory(SqliteStore(damaged), HashingEmbedder())
    app = create_app(
        mem, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS, health_check_every_s=0.2)
    )
    try:
        with TestClient(app, base_url="http://memlane.test") as client:  # runs the app's start and stop
            deadline = time.monotonic() + 10
            while client.get("/healthz").status_code == 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            body = client.get("/healthz").json()
            assert body["store"]["detail"]["reason"] == "corrupt"
            assert body["store"]["detail"]["integrity"]["source"] == "check"
    finally:
        mem.close()


# -- writes that the store refuses, with the reason in the body ---------------------------------------------


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[Service, dict[str, str]]]:
    """A service whose store's connections are made to refuse writes as asked (``mode["now"]``): a store
    that may not grow any more (``PRAGMA max_page_count``: SQLITE_FULL, as on a full disk), one opened
    read-only (SQLITE_READONLY), or nothing."""
    path = tmp_path / "r.db"
    filled_store(path)
    mode = {"now": "ok"}
    connect = sqlite3.connect

    def patched(*args: Any, **kw: Any) -> sqlite3.Connection:
        conn = connect(*args, **kw)
        if mode["now"] == "full":
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")
        elif mode["now"] == "readonly":
            conn.execute("PRAGMA query_only = ON")
        return conn

    mem = Memory(SqliteStore(path), HashingEmbedder())
    mem.store.close()  # new connections from here on, made by the patched connect
    monkeypatch.setattr(sqlite_store.sqlite3, "connect", patched)
    svc = service_over(mem)
    yield svc, mode
    svc.transport.shutdown()
    mem.close()


@pytest.mark.parametrize(("mode", "reason"), [("full", "disk full"), ("readonly", "read-only")])
def test_a_refused_write_says_why_and_reads_still_work(
    refusing: tuple[Service, dict[str, str]], mode: str, reason: str
) -> None:
    svc, now = refusing
    key = svc.new_user("alice")
    now["now"] = mode
    svc.memory.store.close()
    alice = svc.client(key)
    big = {"messages": chat("x" * 50_000, "y" * 50_000) * 4}
    resp = alice.post("/v1/memories", json=big)
    assert resp.status_code == 503, resp.text
    message = resp.json()["error"]["message"]
    assert message.startswith(f"the store is unavailable: {reason} (") and "request id" in message
    assert alice.get("/v1/memories").status_code == 200
    if mode == "full":  # (query_only, the read-only stand-in, also refuses the search's scratch table)
        assert alice.post("/v1/search", json={"query": "garden bees"}).status_code == 200


def test_a_locked_store_is_503_locked(
    refusing: tuple[Service, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _ = refusing
    key = svc.new_user("alice")
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 100)
    svc.memory.store.close()
    assert isinstance(svc.memory.store, SqliteStore)
    other = sqlite3.connect(svc.memory.store.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        resp = svc.client(key).post("/v1/memories", json={"messages": chat("hello")})
        assert resp.status_code == 503 and "locked by another writer" in resp.json()["error"]["message"]
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_store_errors_carry_their_cause(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "c.db")
    try:
        with pytest.raises(StoreError) as caught, store.transaction() as conn:
            conn.execute("INSERT INTO no_such_table VALUES (1)")
        assert caught.value.reason == "write failed"
    finally:
        store.close()


# -- memlane serve on a disk that is full -------------------------------------------------------------------


@pytest.fixture
def nearly_full_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs (when this process may mount one) holding a store, then filled to the last 256 KiB: room
    for SQLite's -shm and -wal files, not for an add of any size, and under the 1 MiB the probe asks for."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path, leave: int) -> None:
    with (folder / "filler").open("wb", buffering=0) as f, pytest.raises(OSError):
        while True:
            f.write(b"\0" * 65536)
    (folder / "filler").unlink()
    size = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize - leave
    with (folder / "filler").open("wb", buffering=0) as f:
        f.write(b"\0" * max(0, size))


def test_serve_starts_on_a_full_disk_and_says_what_it_refuses(nearly_full_tmpfs: Path, tmp_path: Path) -> None:
    store = nearly_full_tmpfs / "s.db"
    mem = Memory(SqliteStore(store), HashingEmbedder())
    added = mem.add("alice", chat("I keep bees.", "Nice!")).block_ids
    key = ApiKeys(mem.store).create("alice", "test").key
    mem.close()
    fill(nearly_full_tmpfs, leave=256 * 1024)
    env = {
        **os.environ,
        "MEMLANE_STORE": str(store),
        "MEMLANE_EMBEDDER": "hashing",
        "MEMLANE_ADMIN_KEY": ADMIN_KEY,
        "MEMLANE_LLM": "scripted",
    }
    args = [sys.executable, "-c", CLI, "serve", "--port", "0", "--workers", "1"]
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            found = STARTED.search(line)
            port = int(found.group(1)) if found else None
        assert port is not None, "".join(lines)
        said = "".join(lines)
        assert "the store cannot take writes now (disk full)" in said and "searches, lists" in said, said
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}) as alice:
            assert [b["block_id"] for b in alice.get("/v1/memories").json()] == list(added)
            assert alice.post("/v1/search", json={"query": "bees"}).status_code == 200
            resp = alice.post("/v1/memories", json={"messages": chat("x" * 60_000, "y" * 60_000) * 4})
            assert resp.status_code == 503 and "disk full" in resp.json()["error"]["message"], resp.text
            health = httpx.get(f"http://127.0.0.1:{port}/healthz").json()
            assert health["store"]["detail"]["reason"] == "disk full"
            deleted = alice.delete(f"/v1/memories/{added[0]}")
            assert deleted.status_code in (204, 503), deleted.text
            if deleted.status_code == 503:
                assert "disk full" in deleted.json()["error"]["message"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
