"""The blocks recent filters kept, by user, user version and filters, whatever the dialect: a search repeated with
the same filter skips the SQL that finds them."""

from __future__ import annotations

import threading
from collections import OrderedDict

from memlane.core.model import (
    Filters,
)
from memlane.core.store.candidates.vectors import BlockSet

# How many filters' kept blocks the store remembers (FilterCache).
FILTER_CACHE_ENTRIES = 32


def filters_key(filters: Filters) -> tuple[object, ...]:
    """``filters`` as a hashable value (its annotations are a dict)."""
    return (
        filters.sessions,
        filters.block_ids,
        tuple(sorted(filters.annotations.items())),
        filters.annotations_after_cut,
        None if filters.kinds is None else tuple(sorted(filters.kinds)),
        filters.ingested_after,
        filters.ingested_before,
        filters.prompt_id,
        filters.prompt_version,
    )


class FilterCache:
    """The blocks recent filters kept, by (user, user version, filters): a search repeated with the same
    filter (a session, an annotation) skips the SQL that finds them. A write moves the user's version on,
    so an entry is never stale; the least recently used of :data:`FILTER_CACHE_ENTRIES` go first."""

    def __init__(self, entries: int = FILTER_CACHE_ENTRIES) -> None:
        self.entries = entries
        self._items: OrderedDict[tuple[object, ...], BlockSet] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: int, version: int, filters: Filters) -> BlockSet | None:
        key = (user_id, version, filters_key(filters))
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, user_id: int, version: int, filters: Filters, blocks: BlockSet) -> None:
        with self._lock:
            self._items[(user_id, version, filters_key(filters))] = blocks
            while len(self._items) > self.entries:
                self._items.popitem(last=False)
