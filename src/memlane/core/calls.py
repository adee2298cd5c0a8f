"""The LLM call log beside a store: where it is by default, and the one way memlane forgets the calls of
deleted blocks and users.

The call log (:class:`~memlane.core.llm.calllog.CallLog`) holds people's words (an extraction call sends
a block's exchange and gets its summary and facts back), so every path that deletes blocks or users, one
block, a retention sweep, a user, or any later one, deletes their calls through :func:`forget_blocks` or
:func:`forget_user`: by user and block id, never by re-rendering the prompt that made them (prompts change
and can be purged).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from memlane.core.llm.calllog import CallLog
from memlane.core.model import MemoryBlock
from memlane.core.store.postgres.url import is_postgres_url

CALL_LOG_SUFFIX = ".calls.db"


def default_call_log_path(store: str | Path) -> Path | None:
    """The file of the LLM call log of ``store`` unless another is named: ``STORE.calls.db`` beside a SQLite
    store; None for a PostgreSQL store, which keeps its call log in a table of its own
    (:func:`own_call_log`), where every process that deletes finds it."""
    if is_postgres_url(store):
        return None
    path = Path(store)
    return path.with_name(path.name + CALL_LOG_SUFFIX)


def default_call_log_of(store: object) -> Path | None:
    """The default call log file of an opened store: beside a SQLite store's file; None for a store that
    keeps its own (:func:`own_call_log`)."""
    location = getattr(store, "path", None)
    return default_call_log_path(location) if isinstance(location, Path) else None


def own_call_log(store: object) -> CallLog | None:
    """The call log a store keeps in itself (a PostgreSQL store's ``llm_calls`` table), or None (a SQLite
    store's is a file beside it)."""
    make = getattr(store, "own_call_log", None)
    log = make() if callable(make) else None
    return log if isinstance(log, CallLog) else None


class CallLogs:
    """The call logs a memory's deletes clean: ``given`` (if ``close``, this holder closes it), else the file
    at ``path``, opened by the first delete that finds it there (a worker in another process may create it
    after the memory opened) and closed by :meth:`close`; and the LLM's own call log, if it keeps another."""

    def __init__(self, given: CallLog | None, path: Path | None, *, close: bool = False) -> None:
        self.log = given
        self.path = None if given is not None else path
        self._owned = close and given is not None
        self._lock = threading.Lock()

    def all(self, llm: object = None) -> list[CallLog]:
        """This memory's call log (opened now if its file has appeared) and ``llm``'s, each once."""
        with self._lock:
            if self.log is None and self.path is not None and self.path.is_file():
                self.log, self._owned = CallLog(self.path), True
            mine = self.log
        logs = [log for log in (mine, getattr(llm, "call_log", None)) if isinstance(log, CallLog)]
        return [log for i, log in enumerate(logs) if all(log is not other for other in logs[:i])]

    def close(self) -> None:
        """Close the call log this holder opened (or was given to close)."""
        with self._lock:
            if self._owned and self.log is not None:
                self.log.close()
                self.log, self._owned = None, False


def forget_blocks(logs: Iterable[CallLog], blocks: Sequence[MemoryBlock]) -> int:
    """Delete from each of ``logs`` the calls made for ``blocks`` (found by user and block id; calls
    logged before calls carried a block id, by the block's message: :meth:`CallLog.delete_blocks`).
    Returns how many rows went."""
    by_user: dict[str, dict[str, str | None]] = {}
    for block in blocks:
        by_user.setdefault(block.user, {})[block.id] = block.message
    return sum(log.delete_blocks(user, texts) for log in logs for user, texts in by_user.items())


def forget_block_ids(logs: Iterable[CallLog], user: str, block_ids: Sequence[str]) -> int:
    """:func:`forget_blocks` when only the ids are known (the blocks are gone already): the calls that
    carry those block ids."""
    return sum(log.delete_blocks(user, dict.fromkeys(block_ids)) for log in logs)


def forget_user(logs: Iterable[CallLog], user: str) -> int:
    """Delete every call made for ``user`` from each of ``logs``; returns how many rows went."""
    return sum(log.delete_namespace(user) for log in logs)
