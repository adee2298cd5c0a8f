"""A substring as a LIKE pattern: the text's own ``%``, ``_`` and ``\\`` match themselves (``ESCAPE '\\'``)."""

from __future__ import annotations

LIKE_ESCAPE = "\\"


def contains_pattern(text: str) -> str:
    """The LIKE pattern matching any value that holds ``text``; use it with ``ESCAPE '\\'``."""
    escaped = text.replace(LIKE_ESCAPE, LIKE_ESCAPE * 2).replace("%", LIKE_ESCAPE + "%").replace("_", LIKE_ESCAPE + "_")
    return f"%{escaped}%"
