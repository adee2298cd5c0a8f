"""The scale-out store: PostgreSQL + pgvector (or a Citus cluster), as one implementation of each concept's
protocol on the PostgreSQL connection plumbing (:mod:`memlane.core.store.postgres.base`)."""

from __future__ import annotations

from memlane.core.store.apikeys.postgres import PostgresApiKeys
from memlane.core.store.blocks.postgres import PostgresBlocks
from memlane.core.store.candidates.postgres import PostgresCandidates
from memlane.core.store.expiry.postgres import PostgresExpiry
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.prompts.postgres import PostgresPrompts
from memlane.core.store.queue.postgres import PostgresQueue
from memlane.core.store.sessions.postgres import PostgresSessions
from memlane.core.store.users.postgres import PostgresUsers


class PostgresStore(
    PostgresUsers,
    PostgresSessions,
    PostgresBlocks,
    PostgresQueue,
    PostgresExpiry,
    PostgresPrompts,
    PostgresApiKeys,
    PostgresCandidates,
    PostgresBase,
):
    """PostgreSQL store (``postgresql://user:password@host:port/db``). Thread-safe: a pool lends each
    operation its own connection.

    ``schema`` keeps the store in its own PostgreSQL schema (created if missing), so one database can hold
    several stores; by default the tables go where the connection's ``search_path`` points.
    ``durability="normal"`` turns off ``synchronous_commit``: faster commits, but a server crash may lose
    the last acknowledged ones (never corrupt anything)."""
