"""The embedding cache's writes on Citus, made after the write that brought them, on a thread of their own.

On one server an add caches its new embeddings in its own transaction. On Citus the cache is distributed by
content hash, so an entry's shard is on whatever node its hash picks: written inside the add, it would make
every add a transaction across nodes; written after it, before the add returns, it costs the add one more
round trip through the coordinator (0.7 ms of a 6 ms add, measured: docs/scaling.md). So the store hands the
entries to a :class:`CacheWriter`, which writes them soon after, several adds' at a time, and the add returns
once its own transaction has committed. An entry not written (the process ends first, a node is down) is
only a later miss: the text is embedded again.

A deletion drops the cached vectors of the texts it deletes that no other key holds; the store first waits
for the entries this process has handed over (:meth:`CacheWriter.flush`), so none of them lands after it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import StoreError

log = logging.getLogger(__name__)

Put = Callable[[str, dict[str, Vectors]], None]


class CacheWriter:
    """Writes cache entries (model id, {content hash: vector}) with ``put`` on a daemon thread started by the
    first :meth:`submit`; each write takes everything handed over meanwhile, one ``put`` per model."""

    def __init__(self, put: Put) -> None:
        self._put = put
        self._queue: queue.Queue[tuple[str, dict[str, Vectors]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.failures = 0

    def submit(self, model_id: str, items: dict[str, Vectors]) -> None:
        """Hand entries over; they are written soon after."""
        if not items:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memlane-pg-cache", daemon=True)
                self._thread.start()
            self._queue.put((model_id, dict(items)))

    def flush(self) -> None:
        """Wait until every entry handed over so far is written (or its write has failed)."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        """Write what was handed over, then stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            taken = [first]
            while True:
                try:
                    taken.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            by_model: dict[str, dict[str, Vectors]] = {}
            for entry in taken:
                if entry is not None:
                    by_model.setdefault(entry[0], {}).update(entry[1])
            for model_id, items in by_model.items():
                try:
                    self._put(model_id, items)
                except StoreError as exc:  # a cache entry lost is a later miss, never an error of the add
                    self.failures += 1
                    log.warning("embeddings not cached: %s", exc)
            for _ in taken:
                self._queue.task_done()
            if any(entry is None for entry in taken):
                return
