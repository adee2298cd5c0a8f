"""/healthz tells whether a write would succeed (a real write, committed), with the reason when not, and
the queue's state: a full disk, a writer that holds the lock, a role that may not write."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from http_support import ADMIN_KEY, TEST_HOSTS, Service, chat
from psycopg import sql
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings


def service_over(memory: Memory, timeout_s: float = 0.5) -> Service:
    settings = HttpSettings(allowed_hosts=TEST_HOSTS, health_write_timeout_s=timeout_s)
    app = create_app(memory, admin_key=ADMIN_KEY, settings=settings)
    return Service(app, memory, None, SyncASGITransport(app))  # type: ignore[arg-type]


def health(svc: Service) -> tuple[int, dict[str, Any]]:
    resp = svc.client().get("/healthz")
    return resp.status_code, resp.json()


def test_health_says_the_store_is_writable_and_shows_the_queue(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "ok.db"), HashingEmbedder())
    svc = service_over(mem)
    try:
        svc.client(svc.new_user("alice")).post("/v1/memories", json={"messages": chat("hi", "yo"), "extract": "async"})
        status, body = health(svc)
        assert status == 200 and body["store"]["detail"]["writable"] is True
        assert body["queue"]["detail"] | {"oldest_s": None} == {
            "queued": 2, "running": 0, "done": 0, "dead": 0, "oldest_s": None, "llm_waiting": 0,
        }  # fmt: skip
    finally:
        svc.transport.shutdown()
        mem.close()


def test_a_writer_holding_the_lock_is_503_locked(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "locked.db"), HashingEmbedder())
    svc = service_over(mem)
    other = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    try:
        assert health(svc)[0] == 200
        other.execute("BEGIN IMMEDIATE")  # another process's writer, stuck
        status, body = health(svc)
        assert status == 503 and body["status"] == "unhealthy"
        assert body["store"]["ok"] is False and body["store"]["detail"]["writable"] is False
        assert body["store"]["detail"]["reason"] == "locked by another writer"
        assert str(tmp_path) not in str(body)
        other.execute("ROLLBACK")
        assert health(svc)[0] == 200  # and it recovers by itself
    finally:
        other.close()
        svc.transport.shutdown()
        mem.close()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, when this process may mount one (root with CAP_SYS_ADMIN): a disk that really fills."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_503_disk_full(small_tmpfs: Path) -> None:
    mem = Memory(SqliteStore(small_tmpfs / "full.db", durability="normal"), HashingEmbedder())
    svc = service_over(mem)
    filler = small_tmpfs / "filler"
    try:
        alice = svc.client(svc.new_user("alice"))
        assert alice.post("/v1/memories", json={"messages": chat("before", "the disk filled")}).status_code == 201
        assert health(svc)[0] == 200
        # Unbuffered: a buffered file would keep the tail of a partial last write and fail again on close.
        with filler.open("wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 65536)
        status, body = health(svc)
        assert status == 503 and body["store"]["detail"]["reason"] == "disk full", body
        assert str(small_tmpfs) not in str(body)
        assert alice.post("/v1/memories", json={"messages": chat("x" * 60000, "y" * 60000) * 20}).status_code == 503
        filler.unlink()
        assert health(svc)[0] == 200
        assert len(alice.get("/v1/memories").json()) == 2  # nothing acknowledged was lost
    finally:
        svc.transport.shutdown()
        mem.close()


# -- PostgreSQL ----------------------------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> str:
    url = os.environ.get("MEMLANE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("needs a PostgreSQL server: set MEMLANE_TEST_POSTGRES_URL (.ci/postgres.sh starts one)")
    return url


@pytest.mark.postgres
def test_postgres_role_that_may_not_write_is_503(pg_url: str) -> None:
    schema = f"test_{uuid.uuid4().hex[:16]}"
    role = f"reader_{uuid.uuid4().hex[:8]}"
    owner = PostgresStore(pg_url, schema=schema, pool_max=2)
    Memory(owner, HashingEmbedder()).add("alice", chat("I keep bees", "Nice"))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        ident, sch = sql.Identifier(role), sql.Identifier(schema)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'reader'").format(ident))
        db = sql.Identifier(conn.info.dbname)
        # Enough to open the store (schema and migration checks) and read; not to write a row.
        conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(db, ident))
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(sch, ident))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(sch, ident))
        conn.execute(sql.SQL("GRANT INSERT ON {}.meta TO {}").format(sch, ident))
    info = psycopg.conninfo.conninfo_to_dict(pg_url)
    reader_url = psycopg.conninfo.make_conninfo(pg_url, user=role, password="reader")
    reader = Memory(PostgresStore(reader_url, schema=schema, pool_max=2), HashingEmbedder())
    svc = service_over(reader)
    try:
        status, body = health(svc)
        assert status == 503 and body["store"]["detail"]["reason"] == "no write privilege", body
        assert str(info.get("host")) not in str(body) and schema not in str(body)
        assert body["queue"]["ok"] and body["embedder"]["ok"]
        assert [u.name for u in reader.users()] == ["alice"]  # reads still work
        assert health(service_over(Memory(owner, HashingEmbedder())))[0] == 200
    finally:
        svc.transport.shutdown()
        reader.close()
        owner.close()
        drop_schema(pg_url, schema)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.postgres
def test_postgres_lock_held_is_503_locked(pg_url: str) -> None:
    schema = f"test_{uuid.uuid4().hex[:16]}"
    mem = Memory(PostgresStore(pg_url, schema=schema, pool_max=2), HashingEmbedder())
    svc = service_over(mem, timeout_s=0.5)
    try:
        assert health(svc)[0] == 200
        with psycopg.connect(pg_url) as locker:
            locker.execute(sql.SQL("LOCK TABLE {}.meta IN EXCLUSIVE MODE").format(sql.Identifier(schema)))
            status, body = health(svc)
            assert status == 503 and body["store"]["detail"]["reason"] == "locked by another writer", body
        assert health(svc)[0] == 200
    finally:
        svc.transport.shutdown()
        mem.close()
        drop_schema(pg_url, schema)
