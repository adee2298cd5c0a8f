"""Shared fixtures: stores in temporary folders, the deterministic embedder, the real one (session-wide)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore

StoreFactory = Callable[[], Store]


def _sqlite_factory(tmp_path: Path) -> StoreFactory:
    counter = iter(range(1_000_000))

    def make() -> Store:
        return SqliteStore(tmp_path / f"store-{next(counter)}.db")

    return make


@pytest.fixture(params=["sqlite"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Every backend the contract suite runs against. A new backend adds a param here."""
    if request.param == "sqlite":
        return _sqlite_factory(tmp_path)
    raise AssertionError(request.param)  # pragma: no cover


@pytest.fixture
def memory(store_factory: StoreFactory) -> Iterator[Memory]:
    mem = Memory(store_factory(), HashingEmbedder())
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def minilm() -> object:
    from memlane.core.embedding.minilm import MiniLMEmbedder

    return MiniLMEmbedder()
