"""The store's tests, one folder per concept as in memlane.core.store. The helpers several concepts' tests share
(``store_downgrade``: stores of earlier schemas; ``vector_scan``: raw-file scans; ``word_corpus``) live here and
are imported by name, so this folder goes on the import path whichever test runs first."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store

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
