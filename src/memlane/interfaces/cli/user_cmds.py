"""``memlane user create | show | update``: a user's display name and metadata."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any

import click

from memlane.interfaces.cli.app import open_memory, store_options
from memlane.interfaces.cli.pairs import parse_json_object
from memlane.interfaces.wire.shapes import user_json


@click.group("user")
def user_group() -> None:
    """A user (namespace): a display name and metadata (a JSON object) beside its memories. `memlane users`
    lists them, filtered by --name and --metadata KEY=VALUE."""


@user_group.command("create")
@click.argument("user")
@click.option("--name", "display_name", default=None, help="A display name.")
@click.option("--metadata", default=None, metavar="JSON", help="A JSON object kept with the user.")
@click.option("--exist-ok", is_flag=True, help="Succeed (changing nothing) when the user exists.")
@store_options
def create_cmd(
    user: str, display_name: str | None, metadata: str | None, exist_ok: bool, store: Path, embedder: str
) -> None:
    """Create USER; an existing USER exits 1 unless --exist-ok.

    \b
    Example:
      memlane user create alice --name "Alice Liddell" --metadata '{"team": "blue"}'
    """
    meta = parse_json_object(metadata, "--metadata")
    with closing(open_memory(store, embedder, create=True)) as mem:
        created = mem.create_user(user, display_name=display_name, metadata=meta, exist_ok=exist_ok)
    click.echo(f"created user {user}" if created else f"user {user} exists; left as it is")


@user_group.command("show")
@click.argument("user")
@store_options
def show_cmd(user: str, store: Path, embedder: str) -> None:
    """Print USER as JSON: blocks, sessions, display name, metadata, last activity.

    \b
    Example:
      memlane user show alice
    """
    with closing(open_memory(store, embedder)) as mem:
        info = mem.get_user(user)
    click.echo(json.dumps(user_json(info), ensure_ascii=False, indent=2))


@user_group.command("update")
@click.argument("user")
@click.option("--name", "display_name", default=None, help="A new display name.")
@click.option("--metadata", default=None, metavar="JSON", help="New metadata (a JSON object, replacing the old).")
@store_options
def update_cmd(user: str, display_name: str | None, metadata: str | None, store: Path, embedder: str) -> None:
    """Replace USER's display name and/or metadata and print the user.

    \b
    Example:
      memlane user update alice --metadata '{"team": "red"}'
    """
    given: dict[str, Any] = {}
    if display_name is not None:
        given["display_name"] = display_name
    meta = parse_json_object(metadata, "--metadata")
    if meta is not None:
        given["metadata"] = meta
    with closing(open_memory(store, embedder)) as mem:
        info = mem.update_user(user, **given)
    click.echo(json.dumps(user_json(info), ensure_ascii=False, indent=2))


def register(group: click.Group) -> None:
    group.add_command(user_group)
