"""Retention over HTTP: the admin reads and sets the default policy and users' own, and runs a sweep; a user
may read the policy that applies to them."""

from __future__ import annotations

from fastapi import Request, Response

from memlane.core.retention import RetentionPolicy, RetentionReport
from memlane.core.timefmt import coerce_time
from memlane.interfaces.http.auth import Admin, AdminOrSelf
from memlane.interfaces.http.routes.common import UserPath, api_router
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.retention import (
    ApplyIn,
    ApplyOut,
    PoliciesOut,
    PolicyIn,
    PolicyOut,
    UserPolicyOut,
    UserSweptOut,
    policy_out,
)

router = api_router("retention")


def _policy(body: PolicyIn) -> RetentionPolicy:
    return RetentionPolicy(max_age_days=body.max_age_days, max_blocks=body.max_blocks)


@router.get("/v1/retention", response_model=PoliciesOut)
def get_policies(_: Admin, request: Request) -> PoliciesOut:
    """The default policy and every user's own. Admin key."""
    policies = services(request).memory.retention_policies()
    users = {name: policy_out(p) for name, p in sorted(policies.users.items())}
    return PoliciesOut(default=policy_out(policies.default), users={k: v for k, v in users.items() if v})


@router.put("/v1/retention/default", response_model=PolicyOut)
def set_default(body: PolicyIn, _: Admin, request: Request) -> PolicyOut:
    """Set the default policy. Blocks expire at the next sweep. Admin key."""
    services(request).memory.set_retention(None, _policy(body))
    return PolicyOut(max_age_days=body.max_age_days, max_blocks=body.max_blocks)


@router.delete("/v1/retention/default", status_code=204)
def clear_default(_: Admin, request: Request) -> Response:
    """Remove the default policy: users without their own keep everything. Admin key."""
    services(request).memory.set_retention(None, None)
    return Response(status_code=204)


@router.get("/v1/users/{user}/retention", response_model=UserPolicyOut)
def get_user_policy(user: UserPath, _: AdminOrSelf, request: Request) -> UserPolicyOut:
    """The policy that applies to the user, and whether it is their own or the default. Admin key, or the
    user's own key."""
    policy, source = services(request).memory.retention(user)
    return UserPolicyOut(user=user, policy=policy_out(policy), source=source)


@router.put("/v1/users/{user}/retention", response_model=UserPolicyOut)
def set_user_policy(user: UserPath, body: PolicyIn, _: Admin, request: Request) -> UserPolicyOut:
    """Set the user's own policy (it replaces the default for them); 404 if there is no such user. Admin key."""
    policy = _policy(body)
    services(request).memory.set_retention(user, policy)
    return UserPolicyOut(user=user, policy=policy_out(policy), source="user")


@router.delete("/v1/users/{user}/retention", status_code=204)
def clear_user_policy(user: UserPath, _: Admin, request: Request) -> Response:
    """Remove the user's own policy: the default applies again. Admin key."""
    services(request).memory.set_retention(user, None)
    return Response(status_code=204)


@router.post("/v1/retention/apply", response_model=ApplyOut)
def apply(_: Admin, request: Request, body: ApplyIn | None = None) -> ApplyOut:
    """Delete every expired block now (of one user, or all), as completely as deleting a user deletes;
    ``dry_run`` only counts. Admin key."""
    body = body or ApplyIn()
    at = coerce_time(body.at, where="at")
    report = services(request).memory.apply_retention(now=at, user=body.user, dry_run=body.dry_run)
    return apply_out(report)


def apply_out(report: RetentionReport) -> ApplyOut:
    return ApplyOut(
        at=report.at.isoformat(),
        dry_run=report.dry_run,
        expired=report.expired,
        users=[
            UserSweptOut(
                user=u.user, policy=policy_out(u.policy), source=u.source, expired=u.expired, remaining=u.remaining
            )
            for u in report.users
        ],
    )
