"""Checking a PostgreSQL store's integrity (``PostgresStore.check``).

Quick (on a schedule): the database's count of pages that failed their checksum when read
(``pg_stat_database.checksum_failures``), which PostgreSQL keeps when the cluster has data checksums.
Full (``memlane check``): memlane's cross-table checks (keys and vectors in step, counters right, no
orphans), then, where the ``amcheck`` extension is installed, ``bt_index_check`` of every B-tree index and
``verify_heapam`` of every table of the store's schema (amcheck is a contrib module: a superuser enables it
with ``CREATE EXTENSION amcheck``; without it the report says it did not run).
"""

from __future__ import annotations

import psycopg

from memlane.core.store.blocks.postgres_rows import INTEGRITY_CHECKS
from memlane.core.store.check import StoreCheck
from memlane.core.store.postgres.dialect import Conn

AMCHECK = "amcheck"
_INDEXES = """
SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.amname = 'btree' AND n.nspname = current_schema() AND i.indisvalid ORDER BY 1
"""
_TABLES = """
SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = current_schema() ORDER BY 1
"""


def quick_check(conn: Conn) -> StoreCheck:
    """Pages of this database that failed their checksum since the statistics were reset."""
    checksums = conn.execute("SHOW data_checksums").fetchone()
    if checksums is None or checksums[0] != "on":
        return StoreCheck(
            (), (), ("data checksums are off in this cluster: a damaged page is found by `memlane check`",)
        )
    row = conn.execute(
        "SELECT coalesce(checksum_failures, 0) FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    failures = int(row[0]) if row else 0
    problems = (f"{failures} page(s) failed their checksum when read",) if failures else ()
    return StoreCheck(("PostgreSQL's count of pages that failed their checksum",), problems)


def full_check(conn: Conn) -> StoreCheck:
    """memlane's own checks, then amcheck's where it is installed. ``conn`` is in autocommit mode, so one
    check that fails on a damaged page does not stop the others."""
    problems: list[str] = []
    for what, statement in INTEGRITY_CHECKS.items():
        try:
            row = conn.execute(statement).fetchone()
        except psycopg.Error as exc:
            problems.append(f"{what}: the check stopped: {_first_line(exc)}")
            continue
        if row and int(row[0]):
            problems.append(f"{what}: {int(row[0])}")
    found = StoreCheck(("memlane's cross-table checks (keys, vectors, jobs, counters)",), tuple(problems))
    installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s", (AMCHECK,)).fetchone()
    if installed is None:
        note = (
            "amcheck is not installed in this database (a superuser can run CREATE EXTENSION amcheck): "
            "its checks did not run"
        )
        return found + StoreCheck((), (), (note,))
    return found + _amcheck(conn)


def _amcheck(conn: Conn) -> StoreCheck:
    problems: list[str] = []
    indexes = [str(r[0]) for r in conn.execute(_INDEXES).fetchall()]
    for index in indexes:
        try:
            conn.execute("SELECT bt_index_check(%s::regclass, true)", (index,))
        except psycopg.Error as exc:
            problems.append(f"index {index}: {_first_line(exc)}")
    ran = [f"amcheck bt_index_check of {len(indexes)} B-tree indexes"]
    heap = conn.execute("SELECT 1 FROM pg_proc WHERE proname = 'verify_heapam'").fetchone()
    if heap is not None:
        tables = [str(r[0]) for r in conn.execute(_TABLES).fetchall()]
        for table in tables:
            try:
                rows = conn.execute(
                    "SELECT blkno, offnum, msg FROM verify_heapam(%s::regclass) LIMIT 5", (table,)
                ).fetchall()
            except psycopg.Error as exc:
                problems.append(f"table {table}: {_first_line(exc)}")
                continue
            problems += [f"table {table}, page {r[0]}, item {r[1]}: {r[2]}" for r in rows]
        ran.append(f"amcheck verify_heapam of {len(tables)} tables")
    return StoreCheck(tuple(ran), tuple(problems))


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
