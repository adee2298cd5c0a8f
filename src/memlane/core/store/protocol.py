"""The store protocol: what the Memory facade needs from any backend, as the composition of one narrow protocol
per concept.

Every method names the user; a backend enforces the namespace in its own queries. Block references
(``int``) are a backend's internal keys, only meaningful to the same store. Each concept's protocol lives in its
folder with both dialects' code (``users/``, ``sessions/``, ``blocks/``, ``prompts/``, ``queue/``, ``expiry/``,
``apikeys/``, ``candidates/``); code that needs one concept depends on that protocol, not on :class:`Store`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.store.apikeys import ApiKeys
from memlane.core.store.blocks import Blocks
from memlane.core.store.candidates import Candidates
from memlane.core.store.check import StoreCheck
from memlane.core.store.expiry import Expiry
from memlane.core.store.prompts import Prompts
from memlane.core.store.queue import Queue
from memlane.core.store.sessions import Sessions
from memlane.core.store.users import Users


class VectorCache(Protocol):
    """The embedding cache kept in the store: vectors by (model, content hash), written with the blocks
    that need them and read before the embedder is called."""

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]: ...

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None: ...


class Upkeep(Protocol):
    """The store as a whole: the embedder its vectors came from, its health, its integrity, closing."""

    def bind_embedder(self, model_id: str, dim: int) -> None: ...

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """Commit one small real write (a row of its own in ``meta``), waiting at most ``timeout_s`` for
        other writers; raise :class:`StoreError` with a ``reason`` when the store cannot take writes now
        (disk full, read-only, locked, unreachable). What a health check runs."""
        ...

    def integrity_check(self) -> list[str]: ...

    def check(self, *, quick: bool = False) -> StoreCheck:
        """The store's integrity: with ``quick``, what is cheap enough to run on a schedule; otherwise
        everything (:class:`memlane.core.store.check.StoreCheck`). Damage found is a problem in the result,
        not an exception."""
        ...

    def close(self) -> None: ...


class Store(Users, Sessions, Blocks, Prompts, Queue, Expiry, ApiKeys, Candidates, VectorCache, Upkeep, Protocol):
    """A whole store: one of each concept's protocol. The backends (:class:`memlane.core.store.sqlite.SqliteStore`,
    :class:`memlane.core.store.postgres.store.PostgresStore`) are compositions of one implementation of each."""
