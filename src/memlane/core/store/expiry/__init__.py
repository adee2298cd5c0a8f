"""What makes blocks go by themselves: TTLs (set, swept) and retention policies (by age or count).

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memlane.core.model import MemoryBlock
from memlane.core.retention import Expired, Policies, RetentionPolicy


class Expiry(Protocol):
    """What makes blocks go by themselves: TTLs (set, swept) and retention policies (by age or count)."""

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
        now: float,
    ) -> int:
        """Set the TTL of the user's live blocks (all, one session's, or the listed ones): ``ttl_s`` and an
        expiry of ``now + ttl_s`` (0: never). Returns how many blocks changed. NotFoundError for an unknown
        user or session."""
        ...

    def expired_users(self, now: float) -> list[str]:
        """The users holding a block whose TTL has run out at ``now`` (what the sweep visits)."""
        ...

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        """The user's blocks whose TTL has run out at ``now``, at most ``limit``, deleted (unless
        ``dry_run``) as completely as by delete_user in one transaction, and returned as they were."""
        ...

    def retention_policies(self) -> Policies:
        """The default retention policy and every user's own (memlane.core.retention)."""
        ...

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """Set (``policy`` None: remove) the default policy (``user`` None) or an existing user's own
        (NotFoundError otherwise)."""
        ...

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        """The user's blocks with an event time before ``before`` or beyond the ``keep`` newest (either
        rule; None: no such rule), at most ``limit``, oldest first: decided and, unless ``dry_run``
        (which only counts them), deleted as completely as by delete_user and returned, in one transaction
        that serialises with the user's adds. An unknown user has none."""
        ...
