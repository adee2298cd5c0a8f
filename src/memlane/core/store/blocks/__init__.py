"""A user's memory blocks: the write of one add, reads by id, listing and browsing with filters, updates and
deletes. Every read hides a block whose TTL has run out at once, before any sweep deletes it.

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import ValidationError
from memlane.core.model import Filters, MemoryBlock, Page


@dataclass(frozen=True, slots=True)
class BlockWrite:
    """How :meth:`Blocks.write_blocks` writes one add, besides its blocks and their vectors.

    ``cache_entries``: (model id, {content hash: vector}) written to the embedding cache in the same
    transaction (None: none). ``enqueue_attempts``: > 0 enqueues one extraction job per block in that
    transaction (the outbox), allowed that many attempts; 0 enqueues none. ``epoch``: the user's deletion
    epoch the add read when it began (None: no earlier start to check). ``default_ttl_s``: the TTL of
    blocks that give none and whose session gives none (0: never expire)."""

    cache_entries: tuple[str, dict[str, Vectors]] | None = None
    enqueue_attempts: int = 0
    epoch: int | None = None
    default_ttl_s: int = 0


@dataclass(frozen=True, slots=True)
class BlockUpdate:
    """What :meth:`Blocks.update_block` does besides writing the block as given.

    ``reset_ttl``: the expiry becomes now + the block's effective TTL (its ``ttl_s``, else its session's
    default, else ``default_ttl_s``; 0: never). ``default_ttl_s``: the server's default TTL that falls
    back on. ``enqueue_attempts``: > 0 queues the block's extraction again with that many attempts (its
    other jobs are dropped); 0 queues nothing."""

    reset_ttl: bool = False
    default_ttl_s: int = 0
    enqueue_attempts: int = 0


@dataclass(frozen=True, slots=True)
class BlockListing:
    """Which of a user's live blocks :meth:`Blocks.list_blocks` pages through and :meth:`Blocks.count_blocks`
    counts: those of ``conversation_id`` and of ``session_id`` (None: any)."""

    conversation_id: str | None = None
    session_id: str | None = None

    def equalities(self) -> list[tuple[str, str]]:
        """The (column of blocks ``b``, value) pairs the listing requires equal, in a fixed order."""
        pairs = [("b.conversation_id", self.conversation_id), ("b.session_id", self.session_id)]
        return [(column, value) for column, value in pairs if value is not None]


BROWSE_ORDERS = ("ingested", "event")


@dataclass(frozen=True, slots=True)
class BlockBrowse:
    """One page of :meth:`Blocks.browse_blocks`.

    ``filters``: the rules a block must pass (annotations always applied; None: every block).
    ``order``: ``"ingested"`` (newest ingest time first) or ``"event"`` (newest event time first); ties by
    block id, newest first; anything else is a ValidationError here. ``limit`` / ``offset``: the page.
    ``after`` / ``before``: the event-time window [after, before) in epoch seconds (None: open)."""

    filters: Filters | None
    order: str
    limit: int
    offset: int
    after: float | None = None
    before: float | None = None

    def __post_init__(self) -> None:
        if self.order not in BROWSE_ORDERS:
            raise ValidationError(f"must be 'ingested' or 'event', not {self.order!r}", where="order")


DEFAULT_WRITE = BlockWrite()
"""An add with no cache entries, no jobs, no epoch to check and no default TTL."""
ALL_BLOCKS = BlockListing()
"""Every live block of the user."""


class Blocks(Protocol):
    """A user's memory blocks: the write of one add, reads by id, listing and browsing with filters, updates and
    deletes. Every read hides a block whose TTL has run out at once, before any sweep deletes it."""

    def write_blocks(
        self, user: str, blocks: Sequence[MemoryBlock], vectors: Vectors, how: BlockWrite = DEFAULT_WRITE
    ) -> list[int]:
        """One add (the blocks with their message vectors, as ``how`` says) in one transaction, the whole add
        or nothing; the ids of the jobs it enqueued. UserDeletedError, writing nothing, if the user was
        deleted after ``how.epoch``.

        Each block's session is created when missing (started at the earliest event time of its blocks,
        its conversation the block's); SessionEndedError, writing nothing, if one has ended. A block's
        ``expires_at`` is decided here: its ``ingest_time`` + its ``ttl_s``, else its session's default TTL,
        else ``how.default_ttl_s`` (0: never); ``last_queued_at`` is set when a job is enqueued."""
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
        self, user: str, listing: BlockListing = ALL_BLOCKS, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryBlock]:
        """The listed blocks in event order (then conversation, session, exchange order), paged."""
        ...

    def count_blocks(self, user: str, listing: BlockListing = ALL_BLOCKS) -> int:
        """How many blocks ``list_blocks`` pages through with this listing (0 for an unknown user)."""
        ...

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]: ...

    def update_block(
        self, user: str, block: MemoryBlock, vectors: Vectors | None, how: BlockUpdate, *, now: float
    ) -> MemoryBlock:
        """Replace the stored block of the same id with ``block`` in one transaction, and return it as
        stored. With ``vectors`` (those of ``block.message``), the content changed: every search key of the
        old block (message, summary, facts) goes, with its vector, term bag, keyword statistics and ANN
        entry, and a message key of the new text is written; summary and facts are cleared. Annotations,
        kind, sides, prompt id/version and ``updated_at`` are written as given. The expiry and the queue as
        ``how`` says (:class:`BlockUpdate`; a TTL counted from ``now``). NotFoundError if the block is not
        the user's or has expired; SessionEndedError if its session has ended."""
        ...

    def browse_blocks(self, user: str, browse: BlockBrowse, *, now: float) -> Page[MemoryBlock]:
        """Every live block of the user that passes ``browse.filters`` (annotations always applied) and its
        event-time window, newest first by its order, paged as it says, with the total."""
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
