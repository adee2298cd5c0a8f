"""``memlane keys create | list | revoke``: a user's API keys, as the Python API (:class:`ApiKeys`) makes them.

The same keys as ``POST|GET|DELETE /v1/users/{user}/keys``, made on the store directly: no server, no admin
key. That also reaches a user whose name no URL path can carry (a ``/`` stored before the name rule).
"""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import click

from memlane.core.apikeys import ROLE_READ_WRITE, ROLES, ApiKeys
from memlane.core.errors import NotFoundError
from memlane.core.names import shown
from memlane.interfaces.cli.app import open_memory, store_options
from memlane.interfaces.wire.shapes import key_json

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON, as the HTTP API answers.")


@click.group("keys")
def keys_group() -> None:
    """API keys of a user: each opens that user's memory over HTTP (`memlane serve`) and MCP. The key is shown
    once, when it is made; the store keeps only its hash.

    \b
    Example:
      memlane keys create alice --label laptop
      memlane keys list alice --json
      memlane keys revoke alice 3f9a1c2b7d4e
    """


@keys_group.command("create")
@click.argument("user")
@click.option("--label", default="", help="A note for the admin: who holds the key.")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default=ROLE_READ_WRITE,
    show_default=True,
    help="read-only: reads and searches; read-write: also writes; admin: also the prompt registry.",
)
@json_option
@store_options
def create_cmd(user: str, label: str, role: str, as_json: bool, store: Path, embedder: str) -> None:
    """Make a new API key for USER and print it (this is the only time it is shown). USER must exist; exit 3
    if it does not.

    \b
    Example:
      memlane keys create alice --label "alice's laptop"
      MEMLANE_KEY=$(memlane keys create alice --json | jq -r .key)
    """
    with closing(open_memory(store, embedder)) as mem:
        new = ApiKeys(mem.store).create(user, label, role)
    if as_json:
        click.echo(json.dumps({"key": new.key, **key_json(new.record)}, ensure_ascii=False))
        return
    click.echo(new.key)
    click.echo(f"key {new.record.key_id} ({role}) for {shown(user)}: shown this once, keep it now", err=True)


@keys_group.command("list")
@click.argument("user")
@json_option
@store_options
def list_cmd(user: str, as_json: bool, store: Path, embedder: str) -> None:
    """List USER's API keys, oldest first, without their secrets: id, role, creation time, label.

    \b
    Example:
      memlane keys list alice
    """
    with closing(open_memory(store, embedder)) as mem:
        keys = [key_json(k) for k in ApiKeys(mem.store).list(user)]
    if as_json:
        click.echo(json.dumps(keys, ensure_ascii=False))
        return
    for k in keys:
        click.echo(f"{k['key_id']}\t{k['role']}\t{k['created_at']}\t{shown(k['label']) if k['label'] else ''}")
    if not keys:
        click.echo(f"{shown(user)} has no API keys", err=True)


@keys_group.command("revoke")
@click.argument("user")
@click.argument("key_id")
@json_option
@store_options
def revoke_cmd(user: str, key_id: str, as_json: bool, store: Path, embedder: str) -> None:
    """Revoke USER's key KEY_ID: it stops working at once, on every server of the store. Exit 3 if USER has no
    such key.

    \b
    Example:
      memlane keys revoke alice 3f9a1c2b7d4e
    """
    with closing(open_memory(store, embedder)) as mem:
        revoked = ApiKeys(mem.store).revoke(user, key_id)
    if not revoked:
        raise NotFoundError(f"key {key_id!r} not found for user {user!r}")
    if as_json:
        click.echo(json.dumps({"user": user, "key_id": key_id, "revoked": True}, ensure_ascii=False))
    else:
        click.echo(f"revoked key {key_id} of {shown(user)}")


def register(group: click.Group) -> None:
    group.add_command(keys_group)
