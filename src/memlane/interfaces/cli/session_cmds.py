"""``memlane session create | list | show | update | end | delete``: sessions as first-class records."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import click

from memlane.core.model import Session
from memlane.core.names import shown
from memlane.interfaces.cli.app import open_memory, store_options
from memlane.interfaces.cli.options import TTL, page_options
from memlane.interfaces.cli.pairs import parse_json_object, parse_pairs
from memlane.interfaces.wire.shapes import page_json, session_json


def _print(session: Session) -> None:
    click.echo(json.dumps(session_json(session), ensure_ascii=False, indent=2))


@click.group("session")
def session_group() -> None:
    """A user's sessions: a start and an end time, annotations, metadata and a default TTL for their blocks.
    An ended session keeps its blocks readable and searchable and refuses new writes (exit 1)."""


@session_group.command("create")
@click.argument("user")
@click.argument("session_id")
@click.option("--conversation", "conversation_id", default="default", show_default=True)
@click.option("--started-at", default=None, help="When it started. Default: now.")
@click.option("--annotation", "annotation_pairs", multiple=True, metavar="KEY=VALUE", help="A label (repeat).")
@click.option("--metadata", default=None, metavar="JSON", help="A JSON object kept with it.")
@click.option("--ttl", "default_ttl_s", type=TTL, default=None, help="The TTL in seconds of its blocks that give none.")
@click.option("--exist-ok", is_flag=True, help="Show the existing session instead of failing when it exists.")
@store_options
def create_cmd(
    user: str,
    session_id: str,
    conversation_id: str,
    started_at: str | None,
    annotation_pairs: tuple[str, ...],
    metadata: str | None,
    default_ttl_s: int | None,
    exist_ok: bool,
    store: Path,
    embedder: str,
) -> None:
    """Start SESSION_ID for USER (who must exist: `memlane user create`, or any add) and print it as JSON.

    \b
    Example:
      memlane session create alice trip-2024 --annotation topic=travel --ttl 2592000
    """
    annotations = parse_pairs(annotation_pairs, "--annotation")
    meta = parse_json_object(metadata, "--metadata")
    with closing(open_memory(store, embedder, create=True)) as mem:
        session = mem.create_session(
            user,
            session_id,
            conversation_id=conversation_id,
            started_at=started_at,
            annotations=annotations,
            metadata=meta,
            default_ttl_s=default_ttl_s,
            exist_ok=exist_ok,
        )
    _print(session)


@session_group.command("list")
@click.argument("user")
@page_options
@store_options
def list_cmd(user: str, limit: int, offset: int, as_json: bool, store: Path, embedder: str) -> None:
    """USER's sessions, the latest started first: id, start, end, live blocks.

    \b
    Example:
      memlane session list alice --json
    """
    with closing(open_memory(store, embedder)) as mem:
        page = mem.list_sessions(user, limit=limit, offset=offset)
    if as_json:
        click.echo(json.dumps(page_json(page, session_json), ensure_ascii=False))
        return
    for s in page.items:
        end = s.ended_at.isoformat() if s.ended_at else "open"
        click.echo(f"{shown(s.session_id)}\t{s.started_at.isoformat()}\t{end}\t{s.blocks}")
    more = page.total - offset - len(page.items)
    if more > 0:
        click.echo(f"... {more} more sessions ({page.total} in all): --offset {offset + len(page.items)}", err=True)


@session_group.command("show")
@click.argument("user")
@click.argument("session_id")
@store_options
def show_cmd(user: str, session_id: str, store: Path, embedder: str) -> None:
    """Print one of USER's sessions as JSON.

    \b
    Example:
      memlane session show alice trip-2024
    """
    with closing(open_memory(store, embedder)) as mem:
        session = mem.get_session(user, session_id)
    _print(session)


@session_group.command("update")
@click.argument("user")
@click.argument("session_id")
@click.option("--annotation", "annotation_pairs", multiple=True, metavar="KEY=VALUE", help="Replace its labels.")
@click.option("--metadata", default=None, metavar="JSON", help="Replace its metadata (a JSON object).")
@click.option("--ttl", "default_ttl_s", type=TTL, default=None, help="A new default TTL for its new blocks.")
@store_options
def update_cmd(
    user: str,
    session_id: str,
    annotation_pairs: tuple[str, ...],
    metadata: str | None,
    default_ttl_s: int | None,
    store: Path,
    embedder: str,
) -> None:
    """Replace what is given of an open session and print it.

    \b
    Example:
      memlane session update alice trip-2024 --metadata '{"city": "Oslo"}'
    """
    annotations = parse_pairs(annotation_pairs, "--annotation")
    meta = parse_json_object(metadata, "--metadata")
    with closing(open_memory(store, embedder)) as mem:
        session = mem.update_session(
            user, session_id, annotations=annotations, metadata=meta, default_ttl_s=default_ttl_s
        )
    _print(session)


@session_group.command("end")
@click.argument("user")
@click.argument("session_id")
@click.option("--at", default=None, help="When it ended. Default: now.")
@store_options
def end_cmd(user: str, session_id: str, at: str | None, store: Path, embedder: str) -> None:
    """End one of USER's sessions: its blocks stay readable and searchable; writes into it are refused.

    \b
    Example:
      memlane session end alice trip-2024
    """
    with closing(open_memory(store, embedder)) as mem:
        session = mem.end_session(user, session_id, at=at)
    _print(session)


@session_group.command("delete")
@click.argument("user")
@click.argument("session_id")
@store_options
def delete_cmd(user: str, session_id: str, store: Path, embedder: str) -> None:
    """Delete one of USER's sessions and its blocks, with their vectors, keyword statistics, jobs and LLM
    calls.

    \b
    Example:
      memlane session delete alice trip-2024
    """
    with closing(open_memory(store, embedder)) as mem:
        deleted = mem.delete_session(user, session_id)
    click.echo(f"deleted session {session_id} of {user}: {deleted} blocks")


def register(group: click.Group) -> None:
    group.add_command(session_group)
