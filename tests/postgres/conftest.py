"""PostgreSQL fixtures: the server from $MEMLANE_TEST_POSTGRES_URL (skipped without it), a fresh schema per
store, and control of the server process for the crash test (needs $MEMLANE_TEST_PG_DATA and
$MEMLANE_TEST_PG_CTL, which .ci/postgres.sh exports)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_control import PgServer
from pg_stores import NewStore
from psycopg import sql

from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore


@pytest.fixture
def pg_url() -> str:
    url = os.environ.get("MEMLANE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("needs a PostgreSQL server: set MEMLANE_TEST_POSTGRES_URL (.ci/postgres.sh starts one)")
    return url


@pytest.fixture
def new_schema(pg_url: str) -> Iterator[Callable[[], str]]:
    """Names of fresh schemas, all dropped when the test ends."""
    names: list[str] = []

    def make() -> str:
        names.append(f"test_{uuid.uuid4().hex[:16]}")
        return names[-1]

    yield make
    for name in names:
        drop_schema(pg_url, name)


@pytest.fixture
def schema_url(pg_url: str, new_schema: Callable[[], str]) -> str:
    """A URL whose libpq options point the session at a fresh (existing, empty) schema, as a user's own
    URL may: how a store opened by URL alone (``Memory.open``, the CLI) is kept out of ``public``."""
    schema = new_schema()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return f"{pg_url}{'&' if '?' in pg_url else '?'}options=-csearch_path%3D{schema}"


@pytest.fixture
def new_store(pg_url: str, new_schema: Callable[[], str]) -> Iterator[NewStore]:
    """``new_store()`` opens a store in a fresh schema; ``new_store(schema=s)`` another one on schema s."""
    made: list[PostgresStore] = []

    def make(schema: str | None = None, **kw: Any) -> PostgresStore:
        kw.setdefault("pool_max", 4)
        made.append(PostgresStore(pg_url, schema=schema or new_schema(), **kw))
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def citus_url() -> str:
    """A Citus coordinator's database ($MEMLANE_TEST_CITUS_URL, which .ci/citus.sh exports); skipped without."""
    url = os.environ.get("MEMLANE_TEST_CITUS_URL")
    if not url:
        pytest.skip("needs a Citus cluster: set MEMLANE_TEST_CITUS_URL (.ci/citus.sh starts one)")
    return url


@pytest.fixture(params=["postgres", "citus"])
def server_url(request: pytest.FixtureRequest) -> str:
    """One PostgreSQL server, then a Citus coordinator: the tests that take it run on both."""
    return str(request.getfixturevalue("pg_url" if request.param == "postgres" else "citus_url"))


def _stores_on(url: str) -> Iterator[NewStore]:
    """``make()`` opens a store on ``url`` in a fresh schema (``make(schema=s)``: on schema s), all closed and
    their schemas dropped at the end."""
    made: list[PostgresStore] = []

    def make(schema: str | None = None, **kw: Any) -> PostgresStore:
        kw.setdefault("pool_max", 4)
        made.append(PostgresStore(url, schema=schema or f"test_{uuid.uuid4().hex[:16]}", **kw))
        return made[-1]

    yield make
    for store in made:
        store.close()
        drop_schema(url, store.schema or "")


@pytest.fixture
def new_server_store(server_url: str) -> Iterator[NewStore]:
    """Stores on :func:`server_url`'s server."""
    yield from _stores_on(server_url)


@pytest.fixture
def new_citus_store(citus_url: str) -> Iterator[NewStore]:
    """Stores on the Citus cluster."""
    yield from _stores_on(citus_url)


@pytest.fixture
def pg_server(pg_url: str) -> Iterator[PgServer]:
    data, pg_ctl = os.environ.get("MEMLANE_TEST_PG_DATA"), os.environ.get("MEMLANE_TEST_PG_CTL")
    if not data or not pg_ctl:
        pytest.skip("restarting the server needs MEMLANE_TEST_PG_DATA and MEMLANE_TEST_PG_CTL (.ci/postgres.sh)")
    server = PgServer(Path(data), pg_ctl)
    yield server
    if not (server.data / "postmaster.pid").exists():
        server.start()  # a failed test must not leave the suite without its server
