"""The store's integrity as the health check reports it: a quick check on a schedule, and what requests saw.

A store damaged in the middle of its file still answers most requests and takes most writes, so a health
check that only writes a row says "ok" (the row lands on a sound page). The service therefore runs the
store's quick check (:meth:`memlane.core.store.protocol.Store.check`) when it starts and then every
``every_s`` seconds, on a thread of its own, and a request that hits a damaged page (SQLITE_CORRUPT,
PostgreSQL's data or index corruption) marks the store corrupt at once. ``/healthz`` reports the state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from memlane.core.errors import MemlaneError
from memlane.core.store.check import StoreCheck

log = logging.getLogger("memlane.http")


@dataclass(frozen=True, slots=True)
class Integrity:
    """The last word on the store's integrity: ``corrupt`` and the problems behind it, when and how it was
    learnt (``"check"``: the scheduled check; ``"request"``: a request that hit a damaged page)."""

    corrupt: bool
    problems: tuple[str, ...] = ()
    at: float | None = None
    source: str = "check"


class IntegrityWatch:
    """Runs ``check`` (the store's quick check) now and then every ``every_s`` seconds (0: only when asked)."""

    def __init__(self, check: Callable[[], StoreCheck], every_s: float) -> None:
        self._check = check
        self.every_s = every_s
        self._state = Integrity(corrupt=False)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def state(self) -> Integrity:
        with self._lock:
            return self._state

    def run_once(self) -> Integrity:
        """Run the quick check now and keep its result. A check that cannot run (the store is locked or
        unreachable) leaves the last result as it was: that is the write probe's to report."""
        try:
            found = self._check()
        except MemlaneError as exc:
            log.warning("integrity check could not run: %s", exc)
            return self.state()
        state = Integrity(corrupt=not found.ok, problems=found.problems, at=time.time(), source="check")
        if not found.ok:
            log.error("the store is corrupt: %s", "; ".join(found.problems[:5]))
        with self._lock:
            self._state = state
        return state

    def mark_corrupt(self, problem: str) -> None:
        """A request hit a damaged page: corrupt from now on, until a check finds the store sound again."""
        with self._lock:
            self._state = Integrity(corrupt=True, problems=(problem,), at=time.time(), source="request")

    def start(self) -> None:
        """Check now and then on the schedule, on a daemon thread (no-op with ``every_s`` 0)."""
        if self.every_s <= 0 or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="memlane-integrity", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.every_s)
