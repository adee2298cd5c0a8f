"""The embedded default store."""

from memlane.core.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
