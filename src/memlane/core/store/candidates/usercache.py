"""A per-user cache of search indexes (key vectors, key terms) held in memory.

Entries are invalidated by the user's version counter, which every write bumps in the same transaction, so
several processes sharing a file stay correct: a search that finds the cached version older than the
stored one reloads the user's rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, Self, TypeVar


class UserIndex(Protocol):
    """What the cache needs of an entry: the user version it mirrors, its size, and how to grow it."""

    version: int

    @property
    def nbytes(self) -> int: ...

    def appended(self, other: Self) -> Self: ...


T = TypeVar("T", bound=UserIndex)


class UserCache(Generic[T]):
    """An LRU of per-user entries bounded by bytes, safe to share between threads."""

    def __init__(self, max_bytes: int = 2 * 1024**3) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[int, T] = OrderedDict()
        self._bytes = 0

    def get(self, user_id: int, version: int) -> T | None:
        with self._lock:
            item = self._items.get(user_id)
            if item is None or item.version != version:
                return None
            self._items.move_to_end(user_id)
            return item

    def put(self, user_id: int, entry: T) -> None:
        with self._lock:
            self._store(user_id, entry)

    def append(self, user_id: int, prev_version: int, rows: T) -> None:
        """After our own commit moved the user from ``prev_version`` to ``rows.version``, add its rows.

        If the cached copy is not exactly at ``prev_version`` someone else wrote in between; then the cache
        entry is left stale and the next search reloads it.
        """
        with self._lock:
            item = self._items.get(user_id)
            if item is not None and item.version == prev_version:
                self._store(user_id, item.appended(rows))

    def drop(self, user_id: int) -> None:
        with self._lock:
            item = self._items.pop(user_id, None)
            if item is not None:
                self._bytes -= item.nbytes

    def _store(self, user_id: int, entry: T) -> None:
        old = self._items.pop(user_id, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._items[user_id] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.nbytes
