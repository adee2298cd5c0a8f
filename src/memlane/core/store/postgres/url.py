"""Recognising a PostgreSQL URL and showing it without its password (no driver import needed)."""

from __future__ import annotations

import re
from pathlib import Path

from memlane.core.errors import ConfigError

SCHEMES = ("postgresql://", "postgres://")
_PASSWORD = re.compile(r"^(\w+://[^:/@]*:)[^@]*@")
# Where a comma starts another URL (the former sharded store's list), not libpq's multi-host form.
_SHARD_SEP = re.compile(r",\s*(?=postgres(?:ql)?://)", re.IGNORECASE)


def is_postgres_url(target: str | Path) -> bool:
    """True for ``postgresql://...`` or ``postgres://...`` (libpq's two URL schemes); a Path never is."""
    return isinstance(target, str) and target.lower().startswith(SCHEMES)


def refuse_url_list(target: str) -> None:
    """ConfigError for several URLs joined by commas: the form of memlane's former store sharded by user,
    which Citus replaced (docs/scaling.md says how to move such a store). libpq's own multi-host form
    (``postgresql://h1,h2/db``: failover between copies of one database) is a single URL and passes."""
    if len(_SHARD_SEP.split(target)) > 1:
        raise ConfigError(
            "several postgresql:// URLs joined by commas were a store sharded by memlane's own router, which "
            "is gone: run the store on Citus and give the coordinator's URL (docs/scaling.md, "
            "'From the sharded store to Citus')"
        )


def redact_one(url: str) -> str:
    return _PASSWORD.sub(r"\1***@", url)


def redact(url: str) -> str:
    """The URL (each of a comma-joined list) with its password replaced, for messages and logs."""
    return ",".join(redact_one(p) for p in _SHARD_SEP.split(url))
