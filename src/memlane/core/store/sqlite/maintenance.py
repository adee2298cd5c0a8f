"""Rewriting a SQLite store in place (``memlane compact``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memlane.core.errors import StoreError


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
