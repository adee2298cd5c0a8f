"""``memlane shards``: the servers of a store sharded by user, where a user lives, and moving a user."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from memlane.core.errors import ConfigError
from memlane.interfaces.cli.options import EVERY, store_path_option

if TYPE_CHECKING:
    from memlane.core.store.postgres.sharded import ShardedStore

STORE_HELP = (
    "The sharded store: postgresql:// URLs joined by commas, one per shard, always in the same order. "
    "[env MEMLANE_STORE]"
)


def open_sharded(store: str) -> ShardedStore:
    from memlane.core.store.postgres import open_postgres
    from memlane.core.store.postgres.sharded import ShardedStore

    opened = open_postgres(store, create=False)
    if not isinstance(opened, ShardedStore):
        opened.close()
        raise ConfigError(
            "memlane shards needs a sharded store: several postgresql:// URLs joined by commas (docs/scaling.md)"
        )
    return opened


store_option = store_path_option(STORE_HELP)


@click.group("shards")
def shards_group() -> None:
    """A store sharded by user over several PostgreSQL servers (docs/scaling.md)."""


@shards_group.command("list")
@store_option
@click.option("--json", "as_json", is_flag=True)
def list_cmd(store: str, as_json: bool) -> None:
    """Each shard: its index, its server (password hidden) and how many users it holds.

    \b
    Example:
      memlane shards list --store postgresql://db1/memlane,postgresql://db2/memlane
    """
    from memlane.core.store.postgres.sharded import describe

    sharded = open_sharded(store)
    try:
        rows = describe(sharded)
    finally:
        sharded.close()
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        click.echo(f"{row['shard']}\t{row['users']} users\t{row['server']}")


@shards_group.command("where")
@click.argument("user")
@store_option
@click.option("--json", "as_json", is_flag=True)
def where_cmd(user: str, store: str, as_json: bool) -> None:
    """The shard that holds USER, their home shard (by the hash of the name) and any unfinished move.

    \b
    Example:
      memlane shards where alice --store postgresql://db1/memlane,postgresql://db2/memlane
    """
    from memlane.core.store.postgres.moves import unfinished

    sharded = open_sharded(store)
    try:
        shard, home, pending = sharded.shard_of(user, fresh=True), sharded.home(user), unfinished(sharded, user)
        exists = sharded.shards[shard].has_user(user)
    finally:
        sharded.close()
    row = {"user": user, "shard": shard, "home": home, "exists": exists, "unfinished_move": pending}
    if as_json:
        click.echo(json.dumps(row))
        return
    moving = f", a move from shard {pending[0]} to {pending[1]} is unfinished" if pending else ""
    click.echo(f"{user}: shard {shard} (home {home}){'' if exists else ', no such user yet'}{moving}")


@shards_group.command("move")
@click.argument("user")
@click.option("--to", "to", type=int, required=True, help="The index of the target shard (0 is the first URL).")
@click.option(
    "--drain",
    type=EVERY,
    default=None,
    help="Seconds to wait between the switch and deleting the old copy: longer than every router remembers a "
    "route (default: 35). 0 only when no other process has the store open.",
)
@store_option
@click.option("--json", "as_json", is_flag=True)
def move_cmd(user: str, to: int, drain: float | None, store: str, as_json: bool) -> None:
    """Move USER to shard --to: freeze the user on the source (their writes answer "being moved", 503, for
    the few seconds of the move), copy, verify, switch the map, wait for routers to notice, delete the
    source copy. Interrupted at any point, nothing is lost: run the same command again to finish.

    \b
    Example:
      memlane shards move alice --to 1 --store postgresql://db1/memlane,postgresql://db2/memlane
    """
    from memlane.core.store.postgres.moves import DRAIN_S, move_user

    sharded = open_sharded(store)
    try:
        report = move_user(sharded, user, to, drain_s=DRAIN_S if drain is None else drain)
    finally:
        sharded.close()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "user": user,
                    "from": report.source,
                    "to": report.target,
                    "rows": report.rows,
                    "steps": list(report.steps),
                }
            )
        )
        return
    if not report.steps:
        click.echo(f"{user} is on shard {to} already; nothing to do")
        return
    copied = ", ".join(f"{n} {t}" for t, n in report.rows.items() if n) or "nothing left to copy"
    click.echo(f"moved {user} from shard {report.source} to shard {report.target} ({copied})")


@shards_group.command("grow")
@store_option
@click.option(
    "--new", "new", required=True, help="The new list: the store's URLs in the same order, then the added ones."
)
@click.option("--json", "as_json", is_flag=True)
def grow_cmd(store: str, new: str, as_json: bool) -> None:
    """Add servers to the store: every user stays where they are (the shard map at their new home points
    there); move users to the new shards afterwards with memlane shards move. Stop every process that
    writes to the store first, and start them again with the new list. Interrupted, run it again.

    \b
    Example:
      memlane shards grow --store postgresql://db1/m,postgresql://db2/m \\
          --new postgresql://db1/m,postgresql://db2/m,postgresql://db3/m
    """
    from memlane.core.store.postgres import shard_urls
    from memlane.core.store.postgres.grow import grow

    report = grow(shard_urls(store), shard_urls(new))
    if as_json:
        click.echo(json.dumps(report.__dict__))
        return
    click.echo(
        f"grew from {report.old} to {report.new} shards: {report.users} users stay where they are "
        f"({report.pinned} found through the map at their new home)"
    )


def register(group: click.Group) -> None:
    group.add_command(shards_group)
