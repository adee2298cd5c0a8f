"""A user's memory blocks: the write of one add, reads by id, listing and browsing with filters, updates and
deletes. Every read hides a block whose TTL has run out at once, before any sweep deletes it.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import Filters, MemoryBlock, Page


class Blocks(Protocol):
    """A user's memory blocks: the write of one add, reads by id, listing and browsing with filters, updates and
    deletes. Every read hides a block whose TTL has run out at once, before any sweep deletes it."""

    def write_blocks(
        self,
        user: str,
        blocks: Sequence[MemoryBlock],
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
        *,
        enqueue_attempts: int = 0,
        epoch: int | None = None,
        default_ttl_s: int = 0,
    ) -> list[int]:
        """One add in one transaction; UserDeletedError, writing nothing, if the user was deleted after
        deletion epoch ``epoch`` (what the add read when it began; None: no earlier start to check).

        Each block's session is created when missing (started at the earliest event time of its blocks,
        its conversation the block's); SessionEndedError, writing nothing, if one has ended. A block's
        ``expires_at`` is decided here: its ``ingest_time`` + its ``ttl_s``, else its session's default TTL,
        else ``default_ttl_s`` (0: never); ``last_queued_at`` is set when a job is enqueued."""
        ...

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        """One block of the user; NotFoundError if it is not the user's or has expired (TTL): every read
        of blocks (get, list, count, fetch, candidates, browse) hides expired blocks at once."""
        ...

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        """The user's live blocks of the exchange ``block_id`` belongs to (one per perspective: those that
        share its :attr:`MemoryBlock.exchange_key`), that block first, then by perspective; read through the
        user's index of exchanges, whatever the user's size. NotFoundError if the block is not the user's."""
        ...

    def list_blocks(
        self,
        user: str,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryBlock]: ...

    def count_blocks(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """How many blocks ``list_blocks`` pages through with these filters."""
        ...

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]: ...

    def update_block(
        self,
        user: str,
        block: MemoryBlock,
        vectors: Vectors | None,
        *,
        reset_ttl: bool = False,
        default_ttl_s: int = 0,
        enqueue_attempts: int = 0,
        now: float,
    ) -> MemoryBlock:
        """Replace the stored block of the same id with ``block`` in one transaction, and return it as
        stored. With ``vectors`` (those of ``block.message``), the content changed: every search key of the
        old block (message, summary, facts) goes, with its vector, term bag, keyword statistics and ANN
        entry, and a message key of the new text is written; summary and facts are cleared. Annotations,
        kind, sides, prompt id/version and ``updated_at`` are written as given. With ``reset_ttl`` the
        expiry becomes ``now`` + the effective TTL (the block's ``ttl_s``, else its session's default, else
        ``default_ttl_s``; 0: never). With ``enqueue_attempts`` the block's extraction is queued again (its
        other jobs are dropped). NotFoundError if the block is not the user's or has expired;
        SessionEndedError if its session has ended."""
        ...

    def browse_blocks(
        self,
        user: str,
        filters: Filters | None,
        *,
        order: str,
        limit: int,
        offset: int,
        after: float | None = None,
        before: float | None = None,
        now: float,
    ) -> Page[MemoryBlock]:
        """Every live block of the user that passes ``filters`` (annotations always applied) and the
        event-time window [after, before), newest first by ``order`` (``"ingested"``: ingest time,
        ``"event"``: event time; ties by block id, newest first), paged, with the total."""
        ...

    def delete_block(self, user: str, block_id: str) -> MemoryBlock:
        """Delete one block of ``user`` as completely as delete_user deletes, and return it as it was
        (whose LLM calls the caller then deletes); NotFoundError if it is not the user's."""
        ...

    def delete_blocks(self, user: str, filters: Filters) -> list[MemoryBlock]:
        """Delete every block of ``user`` that passes ``filters`` (every rule, annotations included; expired
        blocks too) as completely as delete_block deletes one, in one transaction, and return them as they
        were (whose LLM calls the caller then deletes); an unknown user has none."""
        ...
