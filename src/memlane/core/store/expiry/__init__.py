"""What makes blocks go by themselves: TTLs (set, swept) and retention policies (by age or count).

The protocol here is what code that needs only this reads; each dialect implements it in its module beside
this one (``sqlite.py``, ``postgres.py``), and a store is one of each (:class:`memlane.core.store.Store`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from memlane.core.errors import NotFoundError
from memlane.core.model import MemoryBlock
from memlane.core.retention import Expired, Policies, RetentionPolicy


@dataclass(frozen=True, slots=True)
class TtlChange:
    """A TTL set on some of a user's live blocks (:meth:`Expiry.set_ttl`).

    ``ttl_s``: the blocks' new TTL in seconds (0: they never expire); ``now``: the time it counts from
    (their expiry becomes ``now + ttl_s``); ``session_id``: only that session's blocks; ``block_ids``: only
    the listed blocks (None: no such limit)."""

    ttl_s: int
    now: float
    session_id: str | None = None
    block_ids: Sequence[str] | None = None


class Expiry(Protocol):
    """What makes blocks go by themselves: TTLs (set, swept) and retention policies (by age or count)."""

    def set_ttl(self, user: str, change: TtlChange) -> int:
        """Set the TTL of the user's live blocks that ``change`` names. Returns how many blocks changed.
        NotFoundError for an unknown user or session."""
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


def _policy(age: object, blocks: object) -> RetentionPolicy:
    return RetentionPolicy(
        max_age_days=None if age is None else int(str(age)), max_blocks=None if blocks is None else int(str(blocks))
    )


# What :func:`policies` reads, the same in both dialects: the default's row, and each user's.
DEFAULT_POLICY = "SELECT max_age_days, max_blocks FROM retention_default WHERE id = 1"
USER_POLICIES = "SELECT u.name, r.max_age_days, r.max_blocks FROM retention_policies r JOIN users u ON u.id = r.user_id"


def policies(default: Sequence[object] | None, rows: Iterable[Sequence[object]]) -> Policies:
    """The policies from the rows of :data:`DEFAULT_POLICY` (None: no default) and :data:`USER_POLICIES`."""
    return Policies(
        default=None if default is None else _policy(*default), users={str(r[0]): _policy(r[1], r[2]) for r in rows}
    )


def policy_statement(
    delete: str, upsert: str, user: str | None, user_id: int | None, policy: RetentionPolicy | None, now: float
) -> tuple[str, tuple[object, ...]]:
    """The statement, with its parameters, that sets (``policy`` None: removes) the default policy (``user``
    None) or the user's own, whose row is ``user_id`` (None: there is no such user, NotFoundError).

    ``delete`` and ``upsert`` are the dialect's statements, naming the table ``{table}`` and its key column
    ``{key}``: ``delete`` takes the key's value, ``upsert`` the key's value, the policy's age and block
    count, and the time it is set (``now``)."""
    if user is None:
        table, key, value = "retention_default", "id", 1
    elif user_id is None:
        raise NotFoundError(f"user {user!r} not found")
    else:
        table, key, value = "retention_policies", "user_id", user_id
    if policy is None:
        return delete.format(table=table, key=key), (value,)
    return upsert.format(table=table, key=key), (value, policy.max_age_days, policy.max_blocks, now)
