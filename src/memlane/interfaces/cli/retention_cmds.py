"""Retention commands: ``memlane retention show | set | apply``."""

from __future__ import annotations

import json
import sys
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path

import click

from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.names import shown
from memlane.core.retention import RetentionPolicy, RetentionReport
from memlane.core.timefmt import coerce_time, now_utc
from memlane.interfaces.cli.app import open_memory, store_options

# An --at up to this far ahead is a clock, not a mistake: beyond it a sweep asks before it deletes.
FUTURE_MARGIN = timedelta(days=1)


def policy_json(policy: RetentionPolicy | None) -> dict[str, int | None] | None:
    return None if policy is None else {"max_age_days": policy.max_age_days, "max_blocks": policy.max_blocks}


def report_json(report: RetentionReport) -> dict[str, object]:
    return {
        "at": report.at.isoformat(),
        "dry_run": report.dry_run,
        "expired": report.expired,
        "users": [
            {
                "user": u.user,
                "policy": policy_json(u.policy),
                "source": u.source,
                "expired": u.expired,
                "remaining": u.remaining,
            }
            for u in report.users
        ],
    }


def _policy(max_age_days: int | None, max_blocks: int | None) -> RetentionPolicy:
    """The policy the options give, with a refusal naming the option rather than the field."""
    try:
        return RetentionPolicy(max_age_days=max_age_days, max_blocks=max_blocks)
    except ValidationError as exc:
        option = f"--{(exc.where or '').replace('_', '-')}"
        raise ValidationError(str(exc).split(": ", 1)[-1], where=option) from None


@click.group("retention")
def retention_group() -> None:
    """Forget old memories: keep blocks N days (by when they were said) and/or a user's newest N blocks.

    A user's own policy replaces the default; the worker sweeps periodically (`memlane worker
    --retention-every`), `memlane retention apply` sweeps now.
    """


@retention_group.command("show")
@click.option("--user", default=None, help="Show the policy that applies to this user (else: the default and all own).")
@click.option("--json", "as_json", is_flag=True)
@store_options
def show_cmd(user: str | None, as_json: bool, store: Path, embedder: str) -> None:
    """Show the retention policies.

    \b
    Example:
      memlane retention show
      memlane retention show --user alice --json
    """
    with closing(open_memory(store, embedder)) as mem:
        if user is not None:
            policy, source = mem.retention(user)
            if as_json:
                click.echo(json.dumps({"user": user, "policy": policy_json(policy), "source": source}))
            else:
                click.echo(f"{shown(user)}: {policy.describe() if policy else 'keep all'} ({source})")
            return
        policies = mem.retention_policies()
    if as_json:
        users = {name: policy_json(p) for name, p in sorted(policies.users.items())}
        click.echo(json.dumps({"default": policy_json(policies.default), "users": users}, ensure_ascii=False))
        return
    click.echo(f"default: {policies.default.describe() if policies.default else 'none (keep all)'}")
    for name, policy in sorted(policies.users.items()):
        click.echo(f"{shown(name)}: {policy.describe()}")


@retention_group.command("set")
@click.option("--user", default=None, help="Set this user's own policy (else: the default for all users).")
@click.option("--max-age-days", type=int, default=None, help="Keep blocks this many days after their event time.")
@click.option("--max-blocks", type=int, default=None, help="Keep only the user's newest this many blocks.")
@click.option("--keep-all", is_flag=True, help="Keep everything (for a user: overrides the default).")
@click.option("--clear", is_flag=True, help="Remove the policy (a user falls back to the default).")
@store_options
def set_cmd(
    user: str | None,
    max_age_days: int | None,
    max_blocks: int | None,
    keep_all: bool,
    clear: bool,
    store: Path,
    embedder: str,
) -> None:
    """Set the default retention policy, or a user's own. Blocks expire at the next sweep.

    \b
    Example:
      memlane retention set --max-age-days 90
      memlane retention set --user alice --max-blocks 1000 --max-age-days 365
      memlane retention set --user alice --clear
    """
    rules = max_age_days is not None or max_blocks is not None
    if sum((rules, keep_all, clear)) != 1:
        raise ValidationError("give --max-age-days and/or --max-blocks, or --keep-all, or --clear", where="options")
    policy = None if clear else _policy(max_age_days, max_blocks)
    with closing(open_memory(store, embedder)) as mem:
        mem.set_retention(user, policy)
    whose = "default" if user is None else shown(user)
    click.echo(f"{whose}: {'cleared' if policy is None else policy.describe()}")


@retention_group.command("apply")
@click.option("--user", default=None, help="Sweep only this user.")
@click.option("--dry-run", is_flag=True, help="Count what would expire; delete nothing.")
@click.option("--at", "at", default=None, help="The sweep's clock (default: now), as any time memlane reads.")
@click.option("--yes", is_flag=True, help="Do not ask before a sweep whose --at is in the future deletes blocks.")
@click.option("--json", "as_json", is_flag=True)
@store_options
def apply_cmd(
    user: str | None, dry_run: bool, at: str | None, yes: bool, as_json: bool, store: Path, embedder: str
) -> None:
    """Delete the blocks that have expired under their user's policy, completely (keys, vectors, jobs, LLM
    calls).

    An --at in the future deletes today what would expire only then: the command says how many blocks that
    is (and how many a sweep now would delete) and asks, unless --yes; without a terminal to ask on, it
    refuses (exit 2).

    \b
    Example:
      memlane retention apply --dry-run
      memlane retention apply --user alice --json
      memlane retention apply --at 2030-01-01 --dry-run
    """
    clock = coerce_time(at, where="--at")
    with closing(open_memory(store, embedder)) as mem:
        if clock is not None and not dry_run and not yes:
            confirm_future_sweep(mem, clock, user)
        report = mem.apply_retention(now=clock, user=user, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report_json(report), ensure_ascii=False))
        return
    verb = "would delete" if dry_run else "deleted"
    for u in report.users:
        if u.expired:
            click.echo(f"{shown(u.user)}: {verb} {u.expired} blocks, {u.remaining} left ({u.source} policy)")
    click.echo(f"{verb} {report.expired} blocks of {sum(u.expired > 0 for u in report.users)} users")


def confirm_future_sweep(mem: Memory, clock: datetime, user: str | None) -> None:
    """Before a sweep at a clock more than :data:`FUTURE_MARGIN` ahead deletes anything: say how much it
    deletes against a sweep now, and ask; refuse (exit 2) when there is no terminal to ask on."""
    now = now_utc()
    if clock - now <= FUTURE_MARGIN:
        return
    then = mem.apply_retention(now=clock, user=user, dry_run=True)
    if then.expired == 0:
        return
    today = mem.apply_retention(now=now, user=user, dry_run=True).expired
    users = sum(u.expired > 0 for u in then.users)
    ahead = (clock - now).days
    click.echo(
        f"warning: --at {clock.isoformat()} is {ahead:,} days from now: this sweep deletes {then.expired:,} "
        f"blocks of {users:,} users (a sweep now would delete {today:,}).",
        err=True,
    )
    if not interactive():
        raise ValidationError(
            "a sweep in the future deletes blocks that have not expired yet; rerun with --yes to delete them "
            "(no terminal to ask on), or with --dry-run to count them",
            where="--at",
        )
    if not click.confirm(f"Delete these {then.expired:,} blocks now?", default=False, err=True):
        click.echo("nothing deleted", err=True)
        sys.exit(1)


def interactive() -> bool:
    """Whether a question can be asked: stdin is a terminal."""
    return sys.stdin.isatty()


def register(group: click.Group) -> None:
    group.add_command(retention_group)
