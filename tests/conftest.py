"""Shared fixtures: stores in temporary folders, the deterministic embedder, the real one (session-wide)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore
from memlane.settings import Settings, env_var

StoreFactory = Callable[[], Store]

POSTGRES_URL_ENV = "MEMLANE_TEST_POSTGRES_URL"
# A Citus coordinator (.ci/citus.sh start): the PostgreSQL store on a distributed cluster.
CITUS_URL_ENV = "MEMLANE_TEST_CITUS_URL"
# Contract tests that exercise one backend's own mechanics, with the reason they skip on the others.
SQLITE_ONLY = {
    "test_search_caches_see_writes_from_another_connection": "opens one SQLite file twice (tests/postgres covers "
    "two stores on one database)",
}


# The settings a developer's shell may export that the tests read on purpose: where the model (and the bench
# cache) lives, and the folder of the data sets the real-data tests use (they skip, saying why, without it).
KEPT_SETTINGS = ("cache_dir", "data")


def unexport_settings(environ: MutableMapping[str, str]) -> list[str]:
    """Remove every documented ``MEMLANE_*`` setting but :data:`KEPT_SETTINGS` from ``environ``; the removed
    names. A `memlane` command run by a test (in process or as a subprocess) reads its settings from the
    environment, so an exported ``MEMLANE_STORE``, ``MEMLANE_EXTRACT=async`` or ``MEMLANE_BENCH_LIMIT=7`` would
    change what the command under test does; each test sets the variables it means to test."""
    names = [env_var(name) for name in Settings.model_fields if name not in KEPT_SETTINGS]
    return [name for name in names if environ.pop(name, None) is not None]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"postgres: needs a PostgreSQL server (${POSTGRES_URL_ENV})")
    # Before any test module is imported, so that nothing reads the developer's settings.
    unexport_settings(os.environ)


def _sqlite_factory(tmp_path: Path) -> StoreFactory:
    counter = iter(range(1_000_000))

    def make() -> Store:
        return SqliteStore(tmp_path / f"store-{next(counter)}.db")

    return make


def _postgres_factory(url: str) -> tuple[StoreFactory, Callable[[], None]]:
    """Each store in a schema of its own, dropped (with everything in it) when the test ends."""
    from memlane.core.store.postgres.schema import drop_schema
    from memlane.core.store.postgres.store import PostgresStore

    made: list[PostgresStore] = []

    def make() -> Store:
        made.append(PostgresStore(url, schema=f"test_{uuid.uuid4().hex[:16]}", pool_max=4))
        return made[-1]

    def cleanup() -> None:
        for store in made:
            store.close()
            drop_schema(url, store.schema or "")

    return make, cleanup


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("citus", marks=pytest.mark.postgres),
    ]
)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Every backend the contract suite runs against. A new backend adds a param here."""
    if request.param == "sqlite":
        yield _sqlite_factory(tmp_path)
        return
    url = os.environ.get(CITUS_URL_ENV if request.param == "citus" else POSTGRES_URL_ENV)
    if not url:
        if request.param == "citus":
            pytest.skip(f"Citus backend: set {CITUS_URL_ENV} (.ci/citus.sh starts a coordinator and two workers)")
        pytest.skip(f"PostgreSQL backend: set {POSTGRES_URL_ENV} (.ci/postgres.sh starts a server)")
    reason = SQLITE_ONLY.get(request.node.originalname)
    if reason:
        pytest.skip(f"SQLite-specific: {reason}")
    make, cleanup = _postgres_factory(url)
    yield make
    cleanup()


@pytest.fixture
def memory(store_factory: StoreFactory) -> Iterator[Memory]:
    mem = Memory(store_factory(), HashingEmbedder())
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def minilm() -> object:
    from memlane.core.embedding.minilm import MiniLMEmbedder

    return MiniLMEmbedder()
