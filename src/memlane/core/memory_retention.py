"""Retention as a service of :class:`memlane.core.memory.Memory`: policies and sweeps (memlane.core.retention
has the rules)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from memlane.core.errors import ValidationError
from memlane.core.extraction.service import known_user
from memlane.core.model import MemoryBlock
from memlane.core.names import check_stored_name
from memlane.core.retention import SWEEP_BATCH, Policies, RetentionPolicy, RetentionReport, sweep_user
from memlane.core.store.expiry import Expiry
from memlane.core.store.users import Users
from memlane.core.timefmt import coerce_time, now_utc, to_epoch


class RetentionRooms(Expiry, Users, Protocol):
    """What the retention sweeps read and delete in the store: the policies and TTLs, and the users."""


class Retention:
    """Retention policies of one memory's store, and their sweeps. ``forget`` deletes the LLM calls of the
    blocks a sweep deleted (:meth:`memlane.core.erase.Eraser.forget`)."""

    def __init__(self, store: RetentionRooms, forget: Callable[[Sequence[MemoryBlock]], int]) -> None:
        self.store = store
        self.forget = forget

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """Set the retention policy of ``user``, or with ``user`` None the default of every user without one
        of their own; ``policy`` None removes it (the user falls back to the default; without a default,
        nothing expires). NotFoundError for an unknown user. Blocks expire at the next sweep
        (:meth:`apply_retention`), not here."""
        if policy is not None and not isinstance(policy, RetentionPolicy):
            raise ValidationError("must be a RetentionPolicy or None", where="policy")
        self.store.set_retention(None if user is None else check_stored_name(user, "user"), policy)

    def retention(self, user: str | None = None) -> tuple[RetentionPolicy | None, str]:
        """The policy that applies to ``user`` and where it comes from (``"user"``, ``"default"``, or
        ``"none"``: nothing expires); with ``user`` None, the default. NotFoundError for an unknown user."""
        policies = self.store.retention_policies()
        if user is None:
            return policies.default, "default" if policies.default is not None else "none"
        known_user(self.store, check_stored_name(user, "user"))
        return policies.effective(user)

    def retention_policies(self) -> Policies:
        """The default policy and every user's own."""
        return self.store.retention_policies()

    def apply_retention(
        self, *, now: datetime | str | float | None = None, user: str | None = None, dry_run: bool = False
    ) -> RetentionReport:
        """Delete every block that has expired at ``now`` (default: the current time) under its user's
        policy, for one user or all; with ``dry_run``, only count them. Expired blocks go completely, like
        a deleted user's (keys, vectors, keyword statistics, jobs, cached vectors, LLM calls), in batches
        of :data:`memlane.core.retention.SWEEP_BATCH`, each decided and deleted in one transaction: an add
        running meanwhile is either seen by a batch or untouched by it. Blocks whose own TTL has run out at
        ``now`` (hidden from every read since) are deleted too, whatever the policy
        (``UserRetention.ttl_expired`` counts them). A user deleted meanwhile is simply
        skipped. NotFoundError for an unknown ``user``."""
        at = coerce_time(now, where="now") or now_utc()
        policies = self.store.retention_policies()
        infos = self.store.list_users() if user is None else [known_user(self.store, check_stored_name(user, "user"))]
        results = [sweep_user(self.store, info, policies, at, dry_run=dry_run, forget=self.forget) for info in infos]
        # Blocks whose TTL has run out: already invisible to every read; deleted here, as completely.
        ttl_users = set(self.store.expired_users(to_epoch(at)))
        swept = []
        for result in results:
            n = 0
            while result.user in ttl_users:
                gone = self.store.delete_ttl_expired(
                    result.user, now=to_epoch(at), limit=None if dry_run else SWEEP_BATCH, dry_run=dry_run
                )
                if not dry_run:
                    self.forget(gone)
                n += len(gone)
                if dry_run or len(gone) < SWEEP_BATCH:
                    break
            swept.append(replace(result, expired=result.expired + n, ttl_expired=n) if n else result)
        return RetentionReport(at=at, dry_run=dry_run, users=tuple(swept))
