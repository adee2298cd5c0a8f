"""Recognising a PostgreSQL URL (or a list of them, one per shard) and showing it without its password (no
driver import needed)."""

from __future__ import annotations

import re
from pathlib import Path

from memlane.core.errors import ConfigError

SCHEMES = ("postgresql://", "postgres://")
_PASSWORD = re.compile(r"^(\w+://[^:/@]*:)[^@]*@")
# Shards are listed as URLs joined by commas: a comma starts a new shard only where a new URL starts, so
# libpq's own multi-host form (postgresql://h1,h2/db, failover between copies of one database) is left whole.
_SHARD_SEP = re.compile(r",\s*(?=postgres(?:ql)?://)", re.IGNORECASE)


def is_postgres_url(target: str | Path) -> bool:
    """True for ``postgresql://...`` or ``postgres://...`` (libpq's two URL schemes), also for a list of
    shards (``postgresql://a/db,postgresql://b/db``); a Path never is."""
    return isinstance(target, str) and target.lower().startswith(SCHEMES)


def shard_urls(target: str) -> list[str]:
    """The servers of a store URL, one per shard in order (a single URL: a list of one). ConfigError for an
    empty part or a server listed twice (two shards in one database would route users to the same rows)."""
    parts = [p.strip() for p in _SHARD_SEP.split(target)]
    if len(parts) == 1:
        return parts
    for i, part in enumerate(parts):
        if not is_postgres_url(part) or part.rstrip(",") != part:
            raise ConfigError(f"shard {i} of the store URL is not a postgresql:// URL: {redact_one(part)!r}")
    seen: dict[str, int] = {}
    for i, part in enumerate(parts):
        if part in seen:
            raise ConfigError(f"shards {seen[part]} and {i} of the store URL are the same database: {redact_one(part)}")
        seen[part] = i
    return parts


def redact_one(url: str) -> str:
    return _PASSWORD.sub(r"\1***@", url)


def redact(url: str) -> str:
    """The URL (every shard's, for a list) with its password replaced, for messages and logs."""
    return ",".join(redact_one(p) for p in _SHARD_SEP.split(url))
