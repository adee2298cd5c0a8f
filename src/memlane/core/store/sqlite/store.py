"""The embedded store: one SQLite file (WAL) holding blocks, keys, vectors and the keyword index, as one
implementation of each concept's protocol on the SQLite connection plumbing
(:mod:`memlane.core.store.sqlite.base`)."""

from __future__ import annotations

from memlane.core.store.apikeys.sqlite import SqliteApiKeys
from memlane.core.store.blocks.sqlite import SqliteBlocks
from memlane.core.store.candidates.sqlite import SqliteCandidates
from memlane.core.store.expiry.sqlite import SqliteExpiry
from memlane.core.store.prompts.sqlite import SqlitePrompts
from memlane.core.store.queue.sqlite import SqliteQueue
from memlane.core.store.sessions.sqlite import SqliteSessions
from memlane.core.store.sqlite.base import SqliteBase
from memlane.core.store.users.sqlite import SqliteUsers


class SqliteStore(
    SqliteUsers,
    SqliteApiKeys,
    SqliteBlocks,
    SqliteQueue,
    SqliteExpiry,
    SqliteCandidates,
    SqliteSessions,
    SqlitePrompts,
    SqliteBase,
):
    """SQLite store. Thread-safe: each thread gets its own connection; SQLite serialises the writers.

    ``durability="full"`` fsyncs every commit (an acknowledged write survives power loss);
    ``"normal"`` survives process crashes (kill -9) but may lose the last commits on power loss."""
