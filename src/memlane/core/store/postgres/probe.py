"""The write probe of the PostgreSQL store: one committed row of ``meta`` (``health_probe``), with lock and
statement timeouts, and the cause of a failure in words that are safe to show (no host, no SQL)."""

from __future__ import annotations

import time

import psycopg

from memlane.core.store.postgres.dialect import Conn

PROBE_SQL = (
    "INSERT INTO meta(key, value) VALUES ('health_probe', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
# SQLSTATE (or its two-character class) -> reason. https://www.postgresql.org/docs/current/errcodes-appendix.html
_REASONS = {
    "53100": "disk full",
    "53": "out of resources",
    "25006": "read-only",
    "42501": "no write privilege",
    "55P03": "locked by another writer",
    "57014": "locked by another writer",  # the probe's statement timeout: it waited on a lock
    "40P01": "locked by another writer",
    "08": "unreachable",
    "XX001": "corrupt",  # data_corrupted
    "XX002": "corrupt",  # index_corrupted
    "57P": "unreachable",  # the server is shutting down or starting up
}


def postgres_reason(exc: BaseException | None, default: str = "write failed") -> str:
    """A short cause of a PostgreSQL failure, safe to show anyone; ``default`` when the error says no more."""
    state = str(getattr(exc, "sqlstate", "") or "")
    for key in (state, state[:3], state[:2]):
        if key and key in _REASONS:
            return _REASONS[key]
    # No SQLSTATE: no connection at all (refused, timed out, the pool could not lend one in time).
    return "unreachable" if isinstance(exc, psycopg.OperationalError) and not state else default


def probe_write(conn: Conn, timeout_s: float) -> None:
    """Write and commit the probe row in the pooled connection's transaction, waiting at most ``timeout_s``
    for locks."""
    ms = max(1, int(timeout_s * 1000))
    conn.execute(f"SET LOCAL lock_timeout = {ms}")
    conn.execute(f"SET LOCAL statement_timeout = {ms}")
    conn.execute(PROBE_SQL, (repr(time.time()),))
