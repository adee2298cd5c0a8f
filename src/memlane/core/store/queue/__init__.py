"""The durable extraction queue kept in the store (docs/design/002-extraction-queue.md).

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from typing import Protocol

from memlane.core.jobs import JobQueue
from memlane.core.model import MemoryBlock


class Queue(Protocol):
    """The durable extraction queue kept in the store (docs/design/002-extraction-queue.md)."""

    def job_queue(self) -> JobQueue: ...

    def requeue_block(self, user: str, block_id: str, *, max_attempts: int, now: float) -> MemoryBlock:
        """Queue the block's extraction again (a new job; its dead ones go), its status back to queued,
        ``last_queued_at`` now; the block as it is then. NotFoundError if unknown or expired;
        ValidationError (where ``block_id``) unless its extraction failed."""
        ...
