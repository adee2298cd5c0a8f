"""The store's tests, one folder per concept as in memlane.core.store, the whole-store tests here. The helpers
several concepts' tests share (``store_samples``, ``store_downgrade``: stores of earlier schemas; ``vector_scan``:
raw-file scans; ``word_corpus``) live here and are imported by name, so this folder goes on the import path
whichever test runs first. The fixtures: one ``store`` of each backend, seen through each concept's protocol
(``users``, ``sessions``, ...), and ``writer``, the Memory over it that puts in what a contract test reads."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.apikeys import ApiKeys
from memlane.core.store.blocks import Blocks
from memlane.core.store.candidates import Candidates
from memlane.core.store.expiry import Expiry
from memlane.core.store.prompts import Prompts
from memlane.core.store.protocol import Store
from memlane.core.store.queue import Queue
from memlane.core.store.sessions import Sessions
from memlane.core.store.users import Users

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

StoreFactory = Callable[[], Store]


@pytest.fixture
def store(store_factory: StoreFactory) -> Iterator[Store]:
    """One store of the backend under test; each concept's contract test reads it through that concept's narrow
    protocol alone (its fixture is typed so), and writes what it needs through ``writer``."""
    made = store_factory()
    yield made
    made.close()


@pytest.fixture
def writer(store: Store) -> Memory:
    """The Memory facade over ``store``: how a contract test puts blocks in the store before it reads them through
    the protocol under test."""
    return Memory(store, HashingEmbedder())


@pytest.fixture
def mem(memory: Memory) -> Memory:
    """The ``memory`` fixture, for the memory-model tests (docs/design/007-memory-model.md)."""
    return memory


# ``store`` seen through one concept's protocol: what a contract test of that concept drives it through.


@pytest.fixture
def users(store: Store) -> Users:
    return store


@pytest.fixture
def sessions(store: Store) -> Sessions:
    return store


@pytest.fixture
def blocks(store: Store) -> Blocks:
    return store


@pytest.fixture
def prompts(store: Store) -> Prompts:
    return store


@pytest.fixture
def queue(store: Store) -> Queue:
    return store


@pytest.fixture
def expiry(store: Store) -> Expiry:
    return store


@pytest.fixture
def api_keys(store: Store) -> ApiKeys:
    return store


@pytest.fixture
def candidates(store: Store) -> Candidates:
    return store
