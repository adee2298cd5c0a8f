"""``memlane check``: the integrity of a store (and of its LLM call log), with a report and an exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from memlane.core.errors import StoreError
from memlane.core.llm import CallLog
from memlane.core.memory import Memory
from memlane.core.store.check import StoreCheck
from memlane.core.store.postgres import is_postgres_url, redact
from memlane.interfaces.cli.app import call_log_path
from memlane.interfaces.cli.options import llm_log_option, store_path_option


@click.command("check")
@llm_log_option("The LLM call log to check too. Default: STORE.calls.db, when it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@store_path_option("Path of the SQLite store, or a postgresql:// URL. [env MEMLANE_STORE]")
def check_cmd(llm_log: Path | None, as_json: bool, store: str) -> None:
    """Check the store's integrity and say what was found. Exit 0: no problem; 1: problems (each listed);
    3: no store at --store.

    SQLite: SQLite's integrity check (every page and index), then memlane's own checks of the key segments
    and the keyword index against the keys; the LLM call log beside the store gets SQLite's check too.
    PostgreSQL: memlane's cross-table checks, then, where the amcheck extension is installed, amcheck's
    checks of every B-tree index and table of the store (the report says when it is not). It reads
    everything: run it when the store is quiet, not on a schedule (`memlane serve` runs a quick check on
    one, --health-check-every).

    \\b
    Example:
      memlane check --store memlane.db
      memlane check --json
    """
    where = redact(store) if is_postgres_url(store) else store
    found = _check_store(store)
    log_path = call_log_path(store, llm_log)
    # A PostgreSQL store's call log is a table of the store, checked with it.
    log_found = _check_call_log(log_path) if log_path is not None and log_path.is_file() else None
    ok = found.ok and (log_found is None or log_found.ok)
    if as_json:
        report: dict[str, object] = {"ok": ok, "store": where, **_as_dict(found), "call_log": None}
        if log_found is not None:
            report["call_log"] = {"path": str(log_path), **_as_dict(log_found)}
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        _print("store", where, found)
        if log_found is not None:
            _print("LLM call log", str(log_path), log_found)
    sys.exit(0 if ok else 1)


def _check_store(store: str) -> StoreCheck:
    """The store's full check; a store that cannot even be opened is a problem too (StoreNotFoundError, for
    no store at all, goes on to exit 3)."""
    try:
        opened = Memory.open_store(store, create=False)
    except StoreError as exc:
        if exc.reason in ("unreachable", "locked by another writer"):
            raise  # not a finding about the store: exit 1 with the error, as any command
        return StoreCheck(("open the store",), (f"the store cannot be opened: {exc}",))
    try:
        return opened.check()
    finally:
        opened.close()


def _check_call_log(path: Path) -> StoreCheck:
    try:
        log = CallLog(path)
    except StoreError as exc:
        return StoreCheck(("open the call log",), (f"the call log cannot be opened: {exc}",))
    try:
        return log.check()
    finally:
        log.close()


def _as_dict(found: StoreCheck) -> dict[str, object]:
    return {"ok": found.ok, "ran": list(found.ran), "problems": list(found.problems), "notes": list(found.notes)}


def _print(what: str, where: str, found: StoreCheck) -> None:
    n = len(found.problems)
    verdict = "ok" if found.ok else f"{n} problem{'s' if n != 1 else ''} found"
    click.echo(f"{what} {where}: {verdict}")
    for line in found.problems:
        click.echo(f"  problem: {line}")
    for line in found.notes:
        click.echo(f"  note: {line}")
    click.echo(f"  checked: {'; '.join(found.ran)}")


def register(group: click.Group) -> None:
    group.add_command(check_cmd)
