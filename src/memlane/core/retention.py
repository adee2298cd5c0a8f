"""Retention: forget what is older than N days, or all but a user's newest N blocks.

A policy is set per user, and once as the default for every user without one of their own. A block
expires when either rule of its user's policy says so:

- ``max_age_days``: its *event time* (when it was said) is more than that many days before the sweep's
  clock. Event time, not ingest time, because that is what "older than 90 days" means to the person
  who said it; the consequence is that a history imported with old times is swept at the next run
  (``dry_run`` shows what would go first).
- ``max_blocks``: it is not among the user's newest ``max_blocks`` blocks (by event time, then by when it
  was stored).

Expired blocks are deleted completely (the same guarantee as deleting a user: nothing of them is left in
any table or index; see ``docs/design/005-user-lifecycle.md``), each batch in one transaction that
decides and deletes together, so a block added concurrently is never deleted by a decision made without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memlane.core.errors import ValidationError
from memlane.core.model import MemoryBlock, UserInfo
from memlane.core.timefmt import to_epoch

DAY_S = 86_400.0

# Bounds a policy is checked against: beyond them a value is a mistake (a typo, a unit mix-up), not a
# wish; a century or a billion blocks is "keep everything", which is what no policy means.
MAX_AGE_DAYS = 36_500
MAX_BLOCKS = 1_000_000_000
# How many blocks one sweep transaction deletes at most: SQLite has one writer, so a sweep of a large user
# is cut into transactions short enough that adds of other users wait for one batch, not the whole sweep.
SWEEP_BATCH = 500
DEFAULT_SWEEP_INTERVAL_S = 3600.0


def _check_bound(value: object, name: str, upper: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be a whole number from 1 to {upper:,}, not {value!r}", where=name)
    if not 1 <= value <= upper:
        raise ValidationError(f"must be from 1 to {upper:,}, not {value:,}", where=name)
    return value


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Keep blocks for ``max_age_days`` days (by event time), and/or only the newest ``max_blocks``; a
    block expires if either rule says so. Both None keeps everything (a user's own such policy overrides
    a default that would expire blocks)."""

    max_age_days: int | None = None
    max_blocks: int | None = None

    def __post_init__(self) -> None:
        _check_bound(self.max_age_days, "max_age_days", MAX_AGE_DAYS)
        _check_bound(self.max_blocks, "max_blocks", MAX_BLOCKS)

    @property
    def keeps_everything(self) -> bool:
        return self.max_age_days is None and self.max_blocks is None

    def cutoff(self, now: datetime) -> float | None:
        """Epoch seconds before which a block's event time has expired (None: no age rule). Counted in
        seconds, not dates: a clock near the first representable time (``0001-01-01``) gives a cutoff
        before it, which no block is older than, instead of a date that cannot exist."""
        if self.max_age_days is None:
            return None
        return to_epoch(now) - self.max_age_days * DAY_S

    def describe(self) -> str:
        """As people read it: "90 days", "newest 1,000 blocks", "90 days, newest 1,000 blocks", "keep all"."""
        parts = []
        if self.max_age_days is not None:
            parts.append(f"{self.max_age_days:,} day{'s' if self.max_age_days != 1 else ''}")
        if self.max_blocks is not None:
            parts.append(f"newest {self.max_blocks:,} block{'s' if self.max_blocks != 1 else ''}")
        return ", ".join(parts) or "keep all"


@dataclass(frozen=True, slots=True)
class Policies:
    """The default policy (None: none set) and the users' own policies, by user name."""

    default: RetentionPolicy | None
    users: dict[str, RetentionPolicy]

    def effective(self, user: str) -> tuple[RetentionPolicy | None, str]:
        """The policy that applies to ``user`` and where it comes from: ``"user"``, ``"default"`` or
        ``"none"`` (no policy: nothing expires)."""
        own = self.users.get(user)
        if own is not None:
            return own, "user"
        if self.default is not None:
            return self.default, "default"
        return None, "none"


@dataclass(frozen=True, slots=True)
class Expired:
    """What one store call of a sweep found: how many blocks expired, the deleted ones (none in a dry run,
    which only counts: a large user's blocks are not read for it) and how many blocks the user has left
    (would have left, in a dry run)."""

    count: int
    blocks: list[MemoryBlock]
    remaining: int


@dataclass(frozen=True, slots=True)
class UserRetention:
    """One user's part of a sweep: the policy applied, where it came from, the blocks expired (deleted,
    or that would be in a dry run) and the blocks the user holds after the sweep (would hold, in a dry
    run)."""

    user: str
    policy: RetentionPolicy | None
    source: str
    expired: int
    remaining: int
    # Of ``expired``: the blocks whose own TTL had run out (write time + TTL; docs/design/007-memory-model.md)
    ttl_expired: int = 0


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What a sweep did (or, with ``dry_run``, would do) at ``at``."""

    at: datetime
    dry_run: bool
    users: tuple[UserRetention, ...]

    @property
    def expired(self) -> int:
        return sum(u.expired for u in self.users)


class ExpiringStore(Protocol):
    """What a sweep needs of a store (:meth:`memlane.core.store.protocol.Store.delete_expired`)."""

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired: ...


def sweep_user(
    store: ExpiringStore,
    info: UserInfo,
    policies: Policies,
    at: datetime,
    *,
    dry_run: bool,
    forget: Callable[[Sequence[MemoryBlock]], object],
) -> UserRetention:
    """One user's part of a sweep at ``at``: their expired blocks deleted in batches of :data:`SWEEP_BATCH`
    (each decided and deleted in one transaction of the store), ``forget`` called with each batch's blocks
    (their LLM calls); with ``dry_run`` only counted."""
    policy, source = policies.effective(info.name)
    if policy is None or policy.keeps_everything:
        return UserRetention(info.name, policy, source, 0, info.blocks)
    expired, remaining = 0, info.blocks
    while True:
        found = store.delete_expired(
            info.name,
            before=policy.cutoff(at),
            keep=policy.max_blocks,
            limit=None if dry_run else SWEEP_BATCH,
            dry_run=dry_run,
        )
        forget(found.blocks)
        expired += found.count
        remaining = found.remaining
        if dry_run or found.count < SWEEP_BATCH:
            break
    return UserRetention(info.name, policy, source, expired, remaining)
