"""API keys kept in the store (memlane.core.apikeys makes and checks them).

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from typing import Protocol

from memlane.core.model import KeyRecord, StoredKey


class ApiKeys(Protocol):
    """API keys kept in the store (memlane.core.apikeys makes and checks them)."""

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        """Store a key of an existing user (NotFoundError otherwise); False if ``key_id`` is taken."""
        ...

    def get_api_key(self, key_id: str) -> StoredKey | None:
        """The key with its user and the deletion epoch, read in one snapshot."""
        ...

    def list_api_keys(self, user: str) -> list[KeyRecord]: ...

    def revoke_api_key(self, user: str, key_id: str) -> bool: ...
