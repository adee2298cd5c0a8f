"""Builds of users' approximate vector indexes in this process, at most one per user at a time: what both
stores' index builders (:class:`memlane.core.store.sqlite.ann.AnnIndexes`,
:class:`memlane.core.store.postgres.ann.AnnBuilder`) share; what a build does is theirs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from memlane.core.store.candidates.annsettings import AnnSettings

log = logging.getLogger(__name__)


class UserBuilds:
    """Runs a user's build on a thread of its own (``settings.background``) or inline, unless one of the
    user's is running already or the builder is closed (``_stop``). A failure is kept in ``errors`` and
    logged (the searches stay exact); a build stopped by closing is only logged."""

    thread_prefix = "memlane-ann"

    def __init__(self, settings: AnnSettings) -> None:
        self.settings = settings
        self._busy: set[int] = set()
        self._threads: dict[int, threading.Thread] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.errors: list[str] = []  # background failures (the search stayed exact)

    def _stopped(self, exc: Exception) -> bool:
        """Whether ``exc`` ended a build because the builder was closed, not because it failed."""
        return self._stop.is_set()

    def _start(self, user_id: int, build: Callable[[], None]) -> None:
        """Run ``build`` for the user now, unless a build of the user is running or the builder is closed."""

        def work() -> None:
            try:
                build()
            except Exception as exc:
                if self._stopped(exc):
                    log.info("approximate index of user %s: build stopped (the store was closed)", user_id)
                else:
                    self.errors.append(f"user {user_id}: {exc}")
                    log.warning("approximate index of user %s: %s", user_id, exc)
            finally:
                with self._lock:
                    self._busy.discard(user_id)
                    if self._threads.get(user_id) is threading.current_thread():
                        del self._threads[user_id]

        with self._lock:
            if user_id in self._busy or self._stop.is_set():
                return
            self._busy.add(user_id)
            if self.settings.background:
                # Started and registered under the lock, so a close() from now on waits for it.
                thread = self._threads[user_id] = threading.Thread(
                    target=work, name=f"{self.thread_prefix}-{user_id}", daemon=True
                )
                thread.start()
                return
        work()
