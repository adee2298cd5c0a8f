"""Stores: the protocol every backend implements, and the embedded SQLite backend."""

from memlane.core.store.protocol import Store

__all__ = ["Store"]
