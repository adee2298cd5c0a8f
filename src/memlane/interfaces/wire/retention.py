"""Retention's request and response shapes, shared by the HTTP routes and the MCP tool."""

from __future__ import annotations

from pydantic import BaseModel, Field

from memlane.core.retention import MAX_AGE_DAYS, MAX_BLOCKS, RetentionPolicy
from memlane.interfaces.wire.schemas import Name, Strict, TimeValue


class PolicyIn(Strict):
    """A block expires if either rule says so; a rule left out (or null) is no rule, and a policy with
    neither keeps everything (for a user: overriding the default)."""

    max_age_days: int | None = Field(
        default=None, ge=1, le=MAX_AGE_DAYS, description="Keep blocks this many days after their event time."
    )
    max_blocks: int | None = Field(default=None, ge=1, le=MAX_BLOCKS, description="Keep the newest this many blocks.")


class PolicyOut(BaseModel):
    max_age_days: int | None
    max_blocks: int | None


class PoliciesOut(BaseModel):
    default: PolicyOut | None = Field(description="The policy of every user without one of their own.")
    users: dict[str, PolicyOut] = Field(description="Users' own policies, by name.")


class UserPolicyOut(BaseModel):
    user: str
    policy: PolicyOut | None = Field(description="The policy that applies; null: nothing expires.")
    source: str = Field(description="user (their own), default, or none.")


class ApplyIn(Strict):
    user: Name | None = Field(default=None, description="Sweep only this user; default: every user.")
    dry_run: bool = Field(default=False, description="Count what would expire; delete nothing.")
    at: TimeValue | None = Field(default=None, description="The sweep's clock; default: now.")


class UserSweptOut(UserPolicyOut):
    expired: int = Field(description="Blocks deleted (in a dry run: that would be).")
    remaining: int = Field(description="Blocks the user holds after the sweep (in a dry run: would hold).")


class ApplyOut(BaseModel):
    at: str
    dry_run: bool
    expired: int
    users: list[UserSweptOut]


def policy_out(policy: RetentionPolicy | None) -> PolicyOut | None:
    return None if policy is None else PolicyOut(max_age_days=policy.max_age_days, max_blocks=policy.max_blocks)
