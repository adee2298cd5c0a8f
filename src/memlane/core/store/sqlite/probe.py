"""The write probe of the SQLite store: can the store take a write right now, and if not, why.

A permission check would say nothing of a full disk or of a writer that holds the lock; a committed write
says it all. Two checks, both cheap: the free space of the store's file system (a write that reuses pages
of the write-ahead log can still commit on a full disk, while an add that needs new pages fails), then
the commit of one row of ``meta`` (``health_probe``, the time of the probe).
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from contextlib import suppress
from pathlib import Path

from memlane.core.errors import StoreError

# Below this much free space an add of a few exchanges (new pages in several tables and their WAL frames)
# can fail, so the store is reported unable to write.
MIN_FREE_BYTES = 1 << 20
PROBE_SQL = (
    "INSERT INTO meta(key, value) VALUES ('health_probe', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
)


def sqlite_reason(exc: BaseException | None, default: str = "write failed") -> str:
    """A short cause of a SQLite failure, safe to show anyone (no path, no SQL); ``default`` when the error
    says no more."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    for prefix, reason in (
        ("SQLITE_FULL", "disk full"),
        ("SQLITE_READONLY", "read-only"),
        ("SQLITE_BUSY", "locked by another writer"),
        ("SQLITE_LOCKED", "locked by another writer"),
        ("SQLITE_CANTOPEN", "cannot open the file"),
        ("SQLITE_CORRUPT", "corrupt"),
        ("SQLITE_NOTADB", "corrupt"),
        ("SQLITE_IOERR", "I/O error"),
        ("SQLITE_PERM", "permission denied"),
    ):
        if name.startswith(prefix):
            return reason
    if "malformed" in str(exc):  # "database disk image is malformed" without an error name (old builds)
        return "corrupt"
    return default


def store_error(message: str, exc: sqlite3.Error, *, default: str = "write failed") -> StoreError:
    """The StoreError of a SQLite failure: ``message`` and the error's text for the log, its cause (disk
    full, read-only, locked, corrupt, ...) as the ``reason`` anyone may be shown."""
    return StoreError(f"{message}: {exc}", reason=sqlite_reason(exc, default))


def check_free_space(path: Path) -> None:
    """StoreError (reason "disk full") when the store's file system has less than MIN_FREE_BYTES free."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError as exc:
        raise StoreError(f"cannot read the free space of {path.parent}: {exc}", reason="cannot open the file") from exc
    if free < MIN_FREE_BYTES:
        raise StoreError(f"{free} bytes free on the file system of {path}", reason="disk full")


def probe_write(conn: sqlite3.Connection, path: Path, timeout_s: float, busy_timeout_ms: int) -> None:
    """Commit the probe row on ``conn`` (waiting at most ``timeout_s`` for the write lock), then put the
    connection's usual ``busy_timeout_ms`` back."""
    check_free_space(path)
    try:
        conn.execute(f"PRAGMA busy_timeout = {max(1, int(timeout_s * 1000))}")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(PROBE_SQL, (repr(time.time()),))
                conn.execute("COMMIT")
            except BaseException:
                # The first error is the one worth reporting.
                with suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                raise
        finally:
            conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    except sqlite3.Error as exc:
        raise StoreError(f"write probe failed on {path}: {exc}", reason=sqlite_reason(exc)) from exc


def open_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """Why a connection to the store at ``path`` could not be opened; on a full disk, that it is full
    (opening a store in WAL mode creates its ``-shm`` and ``-wal`` files beside it, which needs some room)."""
    try:
        check_free_space(path)
    except StoreError as full:
        return StoreError(
            f"cannot open the store at {path}: {exc} ({full}: opening it needs room for its -shm and -wal files)",
            reason=full.reason,
        )
    return store_error(f"cannot open the store at {path}", exc)
