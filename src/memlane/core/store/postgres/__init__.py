"""The scale-out store: PostgreSQL + pgvector (``pip install 'memlane[postgres]'``).

``PostgresStore`` is imported on first use, so that recognising a URL (``is_postgres_url``) needs no
PostgreSQL driver and the embedded default works without one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlane.core.store.postgres.url import is_postgres_url, redact, refuse_url_list

if TYPE_CHECKING:
    from memlane.core.store.candidates.annsettings import AnnSettings
    from memlane.core.store.postgres.store import PostgresStore

__all__ = ["PostgresStore", "is_postgres_url", "open_postgres", "redact"]


def open_postgres(
    url: str,
    *,
    durability: str = "full",
    create: bool = True,
    timeout_s: float = 30.0,
    ann: AnnSettings | None = None,
) -> PostgresStore:
    """Open the store at a ``postgresql://`` URL (``create=False``: only one whose tables exist);
    ConfigError if the driver is not installed. ``timeout_s``: how long an operation waits for the server
    (to connect, or for a connection of the pool) before it fails with StoreError. The URL of a Citus
    coordinator opens a store distributed over its workers (docs/scaling.md). ``ann``: when large users are
    searched through a per-user approximate index (default: :class:`AnnSettings`' defaults)."""
    from memlane.core.errors import ConfigError

    refuse_url_list(url)
    try:
        from memlane.core.store.postgres.store import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            f"a PostgreSQL store needs psycopg and psycopg-pool: pip install 'memlane[postgres]' ({exc})"
        ) from exc
    return PostgresStore(url, durability=durability, create=create, timeout_s=timeout_s, ann=ann)


def __getattr__(name: str) -> object:
    if name == "PostgresStore":
        from memlane.core.store.postgres.store import PostgresStore

        return PostgresStore
    raise AttributeError(name)
