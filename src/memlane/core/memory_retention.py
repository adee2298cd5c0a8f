"""Retention through the Memory facade: policies and sweeps (memlane.core.retention has the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.model import MemoryBlock, UserInfo
from memlane.core.names import check_stored_name
from memlane.core.retention import SWEEP_BATCH, Policies, RetentionPolicy, RetentionReport, sweep_user
from memlane.core.store.protocol import Store
from memlane.core.timefmt import coerce_time, now_utc, to_epoch


class RetentionMethods:
    """The retention methods of :class:`memlane.core.memory.Memory` (a part of it, kept apart for size)."""

    store: Store

    def _forget_calls(self, blocks: Sequence[MemoryBlock]) -> int:
        raise NotImplementedError  # Memory's: the LLM calls of deleted blocks

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
        self._require_user(check_stored_name(user, "user"))
        return policies.effective(user)

    def retention_policies(self) -> Policies:
        """The default policy and every user's own."""
        return self.store.retention_policies()

    def _require_user(self, user: str) -> UserInfo:
        for info in self.store.list_users():
            if info.name == user:
                return info
        raise NotFoundError(f"user {user!r} not found")

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
        infos = [self._require_user(check_stored_name(user, "user"))] if user is not None else self.store.list_users()
        results = [
            sweep_user(self.store, info, policies, at, dry_run=dry_run, forget=self._forget_calls) for info in infos
        ]
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
                    self._forget_calls(gone)
                n += len(gone)
                if dry_run or len(gone) < SWEEP_BATCH:
                    break
            swept.append(replace(result, expired=result.expired + n, ttl_expired=n) if n else result)
        return RetentionReport(at=at, dry_run=dry_run, users=tuple(swept))
