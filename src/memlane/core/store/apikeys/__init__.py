"""API keys kept in the store (memlane.core.apikeys makes and checks them).

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memlane.core.model import KeyRecord, StoredKey


def key_record(row: Sequence[Any]) -> KeyRecord:
    """A key's record from a row that starts (key_id, user's name, label, created_at, role)."""
    return KeyRecord(
        key_id=str(row[0]), user=str(row[1]), label=str(row[2]), created_at=float(row[3]), role=str(row[4])
    )


def stored_key(row: Sequence[Any]) -> StoredKey:
    """A stored key from a row of its record's five columns (:func:`key_record`), the SHA-256 of its secret
    and the deletion epoch."""
    return StoredKey(record=key_record(row), secret_sha256=str(row[5]), epoch=int(row[6]))


class ApiKeys(Protocol):
    """API keys kept in the store (memlane.core.apikeys makes and checks them)."""

    def add_api_key(self, record: KeyRecord, secret_sha256: str) -> bool:
        """Store a key of an existing user (``record.user``; NotFoundError otherwise) with the SHA-256 of its
        secret; False if ``record.key_id`` is taken."""
        ...

    def get_api_key(self, key_id: str) -> StoredKey | None:
        """The key with its user and the deletion epoch, read in one snapshot."""
        ...

    def list_api_keys(self, user: str) -> list[KeyRecord]: ...

    def revoke_api_key(self, user: str, key_id: str) -> bool: ...
