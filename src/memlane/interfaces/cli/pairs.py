"""Option values read into what the core takes: ``KEY=VALUE`` pairs (``--annotation topic=travel``), JSON
objects (``--metadata``), registry prompts (``--prompt ID@VERSION``); a bad one is a ValidationError naming
the option (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memlane.core.errors import ValidationError
from memlane.core.model_checks import check_version


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


def parse_json_object(value: str | None, option: str) -> dict[str, Any] | None:
    """A JSON object given as an option's text (``--metadata '{"team": "blue"}'``); None when not given."""
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ValidationError(f"not JSON: {exc}", where=option) from None
    if not isinstance(parsed, dict):
        raise ValidationError('expected a JSON object, such as \'{"team": "blue"}\'', where=option)
    return parsed


def parse_prompt(value: str | None, option: str = "--prompt") -> tuple[str, int | None] | None:
    """``ID`` (its current version) or ``ID@VERSION`` -> (id, version); None when not given."""
    if value is None:
        return None
    prompt_id, sep, version = value.partition("@")
    if not prompt_id:
        raise ValidationError(f"expected ID or ID@VERSION, not {value!r}", where=option)
    if not sep:
        return (prompt_id, None)
    if not (version.isascii() and version.isdigit()):
        raise ValidationError(f"the version after '@' is a whole number from 0, not {version!r}", where=option)
    return (prompt_id, check_version(int(version), option))
