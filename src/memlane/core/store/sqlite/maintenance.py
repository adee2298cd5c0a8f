"""Keeping a SQLite file (the store, the LLM call log) in shape: rewriting it in place (``memlane compact``),
truncating its write-ahead log after a deletion, checking its integrity."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from memlane.core.errors import StoreError
from memlane.core.store.check import StoreCheck


def use_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Put the file in write-ahead-log mode, waiting up to ``busy_timeout_ms`` for other openers. The switch of
    a new file needs it to itself, and SQLite answers "database is locked" at once, without its busy handler,
    when another process is switching it or reading it at that moment (processes opening a new file together
    did); the switch is retried until the wait is over, then the error is the caller's to translate."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def truncate_wal(conn: sqlite3.Connection, wait_ms: int, busy_timeout_ms: int) -> bool:
    """Copy the write-ahead log into the file and truncate it to nothing (``wal_checkpoint(TRUNCATE)``), so
    that the pages as they were before a deletion are in neither file; wait at most ``wait_ms`` for readers
    of older snapshots, then put the connection's ``busy_timeout_ms`` back. False if a reader kept it from
    finishing (the next checkpoint does). sqlite3 errors are the caller's to translate."""
    conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
    try:
        return int(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]) == 0
    finally:
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")


def sqlite_check(conn: sqlite3.Connection, *, quick: bool) -> StoreCheck:
    """SQLite's ``integrity_check`` (``quick_check`` with ``quick``: the pages and records, not whether every
    index matches its table); a damaged page that stops the check is a problem found, not an error."""
    pragma = "quick_check" if quick else "integrity_check"
    try:
        problems = tuple(f"SQLite: {r[0]}" for r in conn.execute(f"PRAGMA {pragma}").fetchall() if r[0] != "ok")
    except sqlite3.DatabaseError as exc:
        problems = (f"SQLite {pragma} stopped: {exc}",)
    return StoreCheck((f"SQLite {pragma}",), problems)


def compact(conn: sqlite3.Connection, path: Path, page_size: int) -> tuple[int, int]:
    """Rewrite the file (VACUUM) with ``page_size`` pages, each table in key order (so each user's vectors
    and term rows are contiguous again) and no free pages; returns the file's size in bytes before and
    after. Needs the file to itself: fails with StoreError while another connection (another process,
    another thread of the store) has it open. Atomic: a crash leaves the old file."""
    before = file_bytes(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            mode = str(conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            mode = str(exc)
        if mode != "delete":
            raise StoreError(f"cannot compact {path}: another connection has it open ({mode})")
        try:
            conn.execute(f"PRAGMA page_size = {page_size}")
            conn.execute("PRAGMA temp_store = FILE")  # VACUUM's copy is as big as the store: not in RAM
            conn.execute("VACUUM")
        finally:
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA journal_mode = WAL")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot compact {path}: {exc}") from exc
    return before, file_bytes(path)


def file_bytes(path: Path) -> int:
    """The file with its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
