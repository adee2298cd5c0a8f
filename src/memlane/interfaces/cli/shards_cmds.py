"""``memlane shards``: a store on a Citus cluster: distributing one, where users live, isolating a large user,
moving shards, adding a worker and rebalancing, all with Citus's own functions (docs/scaling.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, TypeVar

import click

from memlane.core.errors import ConfigError
from memlane.core.store.postgres import is_postgres_url
from memlane.interfaces.cli.options import ROW_ID, store_path_option

if TYPE_CHECKING:
    from memlane.core.store.postgres.citus import Cluster

STORE_HELP = "The store: a postgresql:// URL of a Citus coordinator's database. [env MEMLANE_STORE]"
MODE_HELP = (
    "How Citus copies the shard: auto (logical replication, writers go on and wait only for the final switch), "
    "force_logical, or block_writes (the shard's writers wait for the whole copy)."
)

F = TypeVar("F", bound=Callable[..., object])
store_option = store_path_option(STORE_HELP)


def mode_option(default: str = "auto") -> Callable[[F], F]:
    def add(func: F) -> F:
        return click.option(
            "--mode",
            type=click.Choice(["auto", "force_logical", "block_writes"]),
            default=default,
            show_default=True,
            help=MODE_HELP,
        )(func)

    return add


def _open(store: str, *, distribute: bool = False) -> Cluster:
    from memlane.core.store.postgres.citus import Cluster
    from memlane.core.store.postgres.store import PostgresStore

    if not is_postgres_url(store):
        raise ConfigError("memlane shards needs a postgresql:// URL of a Citus coordinator's database")
    opened = PostgresStore(store, create=False, distribute=distribute, pool_max=2)
    try:
        return Cluster(opened)
    except BaseException:
        opened.close()
        raise


@contextmanager
def _cluster(store: str) -> Iterator[Cluster]:
    """The cluster of ``store`` for one command; its store is closed after."""
    cluster = _open(store)
    try:
        yield cluster
    finally:
        cluster.store.close()


def _echo(as_json: bool, done: dict[str, object], text: str) -> None:
    """What a command did: ``done`` as JSON, or ``text``."""
    click.echo(json.dumps(done) if as_json else text)


@click.group("shards")
def shards_group() -> None:
    """A store on a Citus cluster: its shards, their workers and the users in them (docs/scaling.md)."""


@shards_group.command("distribute")
@store_option
@click.option("--json", "as_json", is_flag=True)
def distribute_cmd(store: str, as_json: bool) -> None:
    """Distribute an existing store in place on a Citus coordinator: its users' tables by user, co-located,
    the shared ones as reference tables. Citus copies the rows into the shards (the figures say how many and
    how long); the store's writers wait meanwhile. A store already distributed is left as it is.

    \b
    Example:
      memlane shards distribute --store postgresql://coordinator/memlane
    """
    cluster = _open(store, distribute=True)
    done = cluster.store.distributed
    cluster.store.close()
    report = {"distributed": done is not None, **(asdict(done) if done is not None else {})}
    if as_json:
        click.echo(json.dumps(report))
    elif done is None:
        click.echo("already distributed: nothing to do")
    else:
        click.echo(
            f"distributed {len(done.user_tables)} users' tables, {len(done.reference_tables)} reference tables and "
            f"{len(done.hashed_tables)} by content: {done.rows_moved} rows moved in {done.seconds:.1f} s"
        )


@shards_group.command("list")
@store_option
@click.option("--json", "as_json", is_flag=True)
def list_cmd(store: str, as_json: bool) -> None:
    """Each shard of the users' tables: its id, its worker, how many users it holds and its size on disk.

    \b
    Example:
      memlane shards list --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        rows = [asdict(p) for p in cluster.placements()]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        click.echo(f"{row['shard_id']}\t{row['node']}\t{row['users']} users\t{row['bytes']} bytes")


@shards_group.command("where")
@click.argument("user")
@store_option
@click.option("--json", "as_json", is_flag=True)
def where_cmd(user: str, store: str, as_json: bool) -> None:
    """The shard that holds USER's rows and the worker it is on.

    \b
    Example:
      memlane shards where alice --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        shard, node = cluster.where(user)
    _echo(as_json, {"user": user, "shard_id": shard, "node": node}, f"{user}: shard {shard} on {node}")


@shards_group.command("isolate")
@click.argument("user")
@mode_option("block_writes")
@store_option
@click.option("--json", "as_json", is_flag=True)
def isolate_cmd(user: str, mode: str, store: str, as_json: bool) -> None:
    """Give USER a shard of their own (every table's rows of USER alone), on the worker that held them; move
    it elsewhere with `memlane shards move`, online. Searches go on; the split shard's writers wait for the
    copy (block_writes: an online split of memlane's tables failed with Citus 13.2, docs/scaling.md).

    \b
    Example:
      memlane shards isolate alice --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        shard = cluster.isolate(user, mode)
        _, node = cluster.where(user)
    _echo(as_json, {"user": user, "shard_id": shard, "node": node}, f"{user}: shard {shard} of their own on {node}")


@shards_group.command("move")
@click.argument("shard_id", type=ROW_ID)
@click.option("--to", "target", required=True, help="The worker to move it to, as host:port.")
@mode_option()
@store_option
@click.option("--json", "as_json", is_flag=True)
def move_cmd(shard_id: int, target: str, mode: str, store: str, as_json: bool) -> None:
    """Move shard SHARD_ID (with the same shard of every co-located table) to the worker --to, online.

    \b
    Example:
      memlane shards move 102008 --to 10.0.0.7:5432 --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        source = cluster.move(shard_id, target, mode)
    _echo(
        as_json,
        {"shard_id": shard_id, "from": source, "to": target},
        f"shard {shard_id}: moved from {source} to {target}",
    )


@shards_group.command("erase")
@click.argument("user")
@mode_option()
@store_option
@click.option("--json", "as_json", is_flag=True)
def erase_cmd(user: str, mode: str, store: str, as_json: bool) -> None:
    """After `memlane delete-user USER`: rewrite the shard that held USER's rows (moved to another worker,
    online, the old files dropped), so that no byte of their words is left in the data files. A deletion
    removes every row at once, but PostgreSQL leaves a deleted row's bytes in its page until the page is
    rewritten.

    \b
    Example:
      memlane shards erase alice --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        shard, source, target = cluster.erase(user, mode)
    _echo(
        as_json,
        {"user": user, "shard_id": shard, "from": source, "to": target},
        f"{user}: shard {shard} rewritten from {source} onto {target}",
    )


@shards_group.command("add-node")
@click.argument("node")
@store_option
def add_node_cmd(node: str, store: str) -> None:
    """Add the worker NODE (host:port, a PostgreSQL server with Citus and pgvector, memlane's database created
    with both extensions) to the cluster. Writers go on; it takes shards with `memlane shards rebalance`.

    \b
    Example:
      memlane shards add-node 10.0.0.8:5432 --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        node_id = cluster.add_node(node)
    click.echo(f"{node}: node {node_id} added")


@shards_group.command("rebalance")
@mode_option()
@store_option
@click.option("--json", "as_json", is_flag=True)
def rebalance_cmd(mode: str, store: str, as_json: bool) -> None:
    """Move shards until the workers hold about as much (Citus's rebalancer), online.

    \b
    Example:
      memlane shards rebalance --store postgresql://coordinator/memlane
    """
    with _cluster(store) as cluster:
        moves = cluster.rebalance(mode)
    rows = [{"shard_id": s, "from": a, "to": b} for s, a, b in moves]
    if as_json:
        click.echo(json.dumps(rows))
        return
    for row in rows:
        click.echo(f"shard {row['shard_id']}: {row['from']} -> {row['to']}")
    click.echo(f"{len(rows)} shard{'s' if len(rows) != 1 else ''} moved")


def register(group: click.Group) -> None:
    group.add_command(shards_group)
