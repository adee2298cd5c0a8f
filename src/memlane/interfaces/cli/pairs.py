"""``KEY=VALUE`` options (``--annotation topic=travel``, ``--metadata team=blue``) read into a mapping."""

from __future__ import annotations

from collections.abc import Sequence

from memlane.core.errors import ValidationError


def parse_pairs(values: Sequence[str], option: str) -> dict[str, str] | None:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}`` (split at the first ``=``); None when no value was
    given. A value without ``=``, an empty key or a key given twice is a ValidationError naming ``option``."""
    if not values:
        return None
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise ValidationError(f"expected KEY=VALUE, not {value!r}", where=option)
        if key in pairs:
            raise ValidationError(f"key {key!r} given twice", where=option)
        pairs[key] = text
    return pairs
