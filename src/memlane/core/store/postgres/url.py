"""Recognising a PostgreSQL URL and showing it without its password (no driver import needed)."""

from __future__ import annotations

import re
from pathlib import Path

SCHEMES = ("postgresql://", "postgres://")
_PASSWORD = re.compile(r"^(\w+://[^:/@]*:)[^@]*@")


def is_postgres_url(target: str | Path) -> bool:
    """True for ``postgresql://...`` or ``postgres://...`` (libpq's two URL schemes); a Path never is."""
    return isinstance(target, str) and target.lower().startswith(SCHEMES)


def redact(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    return _PASSWORD.sub(r"\1***@", url)
