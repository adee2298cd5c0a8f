"""Every delete of a memory, in one service: a block, the blocks that pass filters, a session, a user.

The store deletes the rows with everything that refers to them (keys, vectors, keyword statistics, jobs,
entries of the approximate index, cached vectors; ``memlane.core.store.protocol``), in one transaction;
then the LLM calls made for what went are deleted from every call log the memory knows
(``memlane.core.calls``). The retention sweep and an update in place forget calls through
:meth:`Eraser.forget` too.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

from memlane.core.calls import CallLogs, forget_block_ids, forget_blocks, forget_user
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.llm.calllog import CallLog
from memlane.core.model import DeletedUser, Filters, MemoryBlock
from memlane.core.model_checks import check_filters
from memlane.core.names import check_stored_name, check_text
from memlane.core.store.protocol import Store


class Eraser:
    """Deletes of one memory's store, and of the LLM calls of what they delete. ``llm`` is read at each
    delete: the LLM's own call log, if it keeps another, is cleaned too (``memory.llm`` may change)."""

    def __init__(self, store: Store, calls: CallLogs, llm: Callable[[], object]) -> None:
        self.store = store
        self.calls = calls
        self.llm = llm

    def call_logs(self) -> builtins.list[CallLog]:
        """The LLM call logs a delete cleans (:class:`memlane.core.calls.CallLogs`)."""
        return self.calls.all(self.llm())

    def forget(self, blocks: Sequence[MemoryBlock]) -> int:
        """Delete the LLM calls of ``blocks`` from every call log this memory knows: what every path that
        deletes blocks calls once the blocks are gone. Returns how many rows went."""
        return forget_blocks(self.call_logs(), blocks) if blocks else 0

    def delete(self, user: str, block_id: str) -> None:
        """Delete one block of ``user`` with everything that refers to it: its keys, vectors, jobs, and its
        extraction's LLM calls. NotFoundError if it is not the user's; calls carrying the block's id are
        deleted even then, so a delete that failed halfway can be repeated."""
        user = check_stored_name(user, "user")
        logs = self.call_logs()  # opened first: a call log that cannot be opened stops the delete before it starts
        try:
            block = self.store.delete_block(user, check_text(block_id, "block_id"))
        except NotFoundError:
            forget_block_ids(logs, user, [block_id])
            raise
        forget_blocks(logs, [block])

    def delete_blocks(self, user: str, filters: Filters) -> builtins.list[str]:
        """Delete every block of ``user`` that passes ``filters`` (every rule, annotations included; expired
        blocks too), in one transaction, as completely as :meth:`delete` deletes one, their LLM calls
        included; returns the ids of the blocks that went (none for an unknown user). ``Filters()`` (no
        rule) deletes every block of the user and keeps the user, their sessions and keys."""
        user = check_stored_name(user, "user")
        if not isinstance(filters, Filters):
            raise ValidationError("must be a Filters (Filters() for every block)", where="filters")
        checked = check_filters(filters) or Filters()
        logs = self.call_logs()  # opened first, as for one block
        blocks = self.store.delete_blocks(user, checked)
        if blocks:
            forget_blocks(logs, blocks)
        return [b.id for b in blocks]

    def delete_session(self, user: str, session_id: str) -> int:
        """Delete the session and its blocks as completely as :meth:`delete_user` deletes (keys, vectors,
        keyword statistics, jobs, ANN entries, cached vectors and LLM calls); returns how many blocks went."""
        user = check_stored_name(user, "user")
        blocks = self.store.delete_session(user, check_stored_name(session_id, "session_id"))
        self.forget(blocks)
        return len(blocks)

    def delete_user_counts(self, user: str) -> DeletedUser:
        """:meth:`delete_user`, answering how many blocks and API keys went. NotFoundError for an unknown
        user, after deleting any LLM calls still logged under the name (what a delete that failed halfway
        left), so that deleting again finishes the job."""
        user = check_stored_name(user, "user")
        logs = self.call_logs()  # opened first: a call log that cannot be opened stops the delete before it starts
        try:
            deleted = self.store.delete_user(user)
        except NotFoundError:
            forget_user(logs, user)
            raise
        forget_user(logs, user)
        return deleted
