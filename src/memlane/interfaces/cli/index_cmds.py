"""Approximate index commands: ``memlane index build | status``.

A `memlane` command such as `search` ends right after its search: it never starts an index build (it would
not live to finish one) and uses the index saved for the user, if any. These commands make and show those
indexes (docs/scaling.md, section 4)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace

import click

from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.names import shown
from memlane.core.store.candidates.annsettings import AnnSettings, IndexStatus
from memlane.core.store.protocol import Store
from memlane.interfaces.cli.options import cli_settings, store_path_option

STORE_HELP = "Path of the SQLite store, or a postgresql:// URL. [env MEMLANE_STORE]"


def _open(store: str) -> tuple[Store, AnnSettings]:
    # Builds run here, in this thread, and only when asked: a search never starts one in this process.
    ann = replace(cli_settings().ann_settings(), build=False, background=False)
    return Memory.open_store(store, create=False, ann=ann), ann


def _threshold(ann: AnnSettings) -> str:
    if ann.threshold is None:
        return "the approximate index is off (MEMLANE_ANN_THRESHOLD=-1): every search scans exactly"
    return f"users with at least {ann.threshold} search keys are searched through an index (MEMLANE_ANN_THRESHOLD)"


def _line(s: IndexStatus) -> str:
    if not s.needed:
        return f"{shown(s.user)}\t{s.keys} keys\tbelow the threshold: searched exactly, no index needed"
    extra = f", {s.tail} keys added since (scanned exactly), {s.deleted} deleted since" if s.state != "none" else ""
    return f"{shown(s.user)}\t{s.keys} keys\t{s.state}\t{s.indexed} indexed{extra}"


@click.group("index")
def index_group() -> None:
    """The approximate vector index of large users (from MEMLANE_ANN_THRESHOLD search keys).

    A server builds a user's index in the background at their first search. A `memlane` command ends too
    soon to finish a build, so it starts none: it uses the saved index and otherwise scans exactly (the
    same results, slower for a large user). `memlane index build` makes the index once; later commands
    use it.
    """


@index_group.command("build")
@click.argument("user", required=False)
@click.option("--all", "all_users", is_flag=True, help="Every user at or past the threshold.")
@store_path_option(STORE_HELP)
def build_cmd(user: str | None, all_users: bool, store: str) -> None:
    """Build USER's index now (or bring it up to date) and save it; searches then use it.

    \b
    Example:
      memlane index build alice
      memlane index build --all
    """
    if (user is None) == (not all_users):
        raise ValidationError("give a USER or --all (not both)", where="arguments")
    opened, ann = _open(store)
    try:
        click.echo(_threshold(ann), err=True)
        if ann.threshold is None:
            return
        names = [user] if user is not None else [s.user for s in opened.index_status() if s.needed]
        for name in names:
            started = time.monotonic()
            before = opened.index_status(name)[0]
            if before.needed:
                click.echo(f"building the index of {shown(name)} ({before.keys} keys) ...", err=True)
            after = opened.build_index(name)
            took = f"\t({time.monotonic() - started:.1f} s)" if after.needed else ""
            click.echo(_line(after) + took)
    finally:
        opened.close()


@index_group.command("status")
@click.argument("user", required=False)
@click.option("--json", "as_json", is_flag=True)
@store_path_option(STORE_HELP)
def status_cmd(user: str | None, as_json: bool, store: str) -> None:
    """Where USER's index (default: every user's) stands: none, ready, stale (still used; a build would
    extend or rebuild it) or, on PostgreSQL, building or invalid (left by an interrupted build).

    \b
    Example:
      memlane index status --json
    """
    opened, ann = _open(store)
    try:
        found = opened.index_status(user)
    finally:
        opened.close()
    if as_json:
        click.echo(json.dumps({"threshold": ann.threshold, "users": [asdict(s) for s in found]}, ensure_ascii=False))
        return
    click.echo(_threshold(ann), err=True)
    for s in found:
        click.echo(_line(s))


def register(group: click.Group) -> None:
    group.add_command(index_group)
