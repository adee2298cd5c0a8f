"""Validation of the memory model's inputs (docs/design/007-memory-model.md): one clear error naming the
field, before anything is written."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memlane.core.bounds import MAX_OFFSET, MAX_PAGE, MAX_VERSION, check_int
from memlane.core.errors import ValidationError
from memlane.core.model import BlockKind, Filters
from memlane.core.names import check_stored_name, check_text
from memlane.core.timefmt import coerce_time

ANNOTATION_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROMPT_ID = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_PROMPT_ID_CHARS = 128
MAX_DESCRIPTION_CHARS = 200
MAX_PROMPT_CHARS = 100_000
MAX_METADATA_BYTES = 64 * 1024
MAX_ANNOTATIONS = 100
MAX_FILTER_IDS = 10_000
MAX_TTL_S = 100 * 365 * 86_400  # a hundred years: beyond it, "never" (0) says what is meant


def check_annotations(value: Mapping[str, str] | None, where: str) -> dict[str, str] | None:
    """Annotations of the memory model: identifier keys (``^[A-Za-z_][A-Za-z0-9_]*$``), string values."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError("must be an object of string values", where=where)
    if len(value) > MAX_ANNOTATIONS:
        raise ValidationError(f"at most {MAX_ANNOTATIONS} annotations", where=where)
    out: dict[str, str] = {}
    for key, text in value.items():
        if not isinstance(key, str) or not ANNOTATION_KEY.match(key):
            raise ValidationError(
                f"keys are identifiers (letters, digits, _; not first a digit), not {key!r}", where=where
            )
        if not isinstance(text, str):
            raise ValidationError(f"values are strings; {key!r} is {type(text).__name__}", where=f"{where}.{key}")
        out[key] = check_text(text, f"{where}.{key}")
    return out


def check_filter_annotations(value: Mapping[str, str] | None, where: str) -> dict[str, str]:
    """Annotation pairs to match: string keys and values (any key a block may carry, the dotted keys of
    the mem0 compatibility layer too)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("must be an object of string values", where=where)
    out: dict[str, str] = {}
    for key, text in value.items():
        if not isinstance(key, str) or not key:
            raise ValidationError(f"keys are non-empty strings, not {key!r}", where=where)
        if not isinstance(text, str):
            raise ValidationError(f"values are strings; {key!r} is {type(text).__name__}", where=f"{where}.{key}")
        out[check_text(key, where)] = check_text(text, f"{where}.{key}")
    return out


def check_ttl(value: object, where: str) -> int | None:
    """A TTL in seconds: an integer from 0 (never expires) up; None: not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"must be a whole number of seconds (0: never), not {value!r}", where=where)
    if value < 0:
        raise ValidationError("must not be negative (0: never expires)", where=where)
    if value > MAX_TTL_S:
        raise ValidationError(f"at most {MAX_TTL_S} seconds (0: never expires)", where=where)
    return value


def check_metadata(value: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    """A JSON object of at most :data:`MAX_METADATA_BYTES`."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError("must be a JSON object", where=where)
    for key in value:
        if not isinstance(key, str):
            raise ValidationError(f"keys are strings, not {key!r}", where=where)
    try:
        text = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be JSON: {exc}", where=where) from None
    if len(text.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValidationError(f"larger than {MAX_METADATA_BYTES} bytes as JSON", where=where)
    check_text(text, where)
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def check_prompt_id(value: object, where: str = "prompt_id") -> str:
    if not isinstance(value, str) or not PROMPT_ID.match(value):
        raise ValidationError(f"letters, digits, '_' and '-' only, not {value!r}", where=where)
    if len(value) > MAX_PROMPT_ID_CHARS:
        raise ValidationError(f"longer than {MAX_PROMPT_ID_CHARS} characters", where=where)
    return value


def check_version(value: object, where: str) -> int | None:
    return None if value is None else check_int(value, where, 0, MAX_VERSION, "a version number")


def check_prompt_ref(value: object, where: str = "prompt") -> tuple[str, int | None] | None:
    """``(prompt id, version or None for the current one)``; a bare id means its current version."""
    if value is None:
        return None
    if isinstance(value, str):
        return check_prompt_id(value, where), None
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise ValidationError("must be a prompt id, or (prompt id, version)", where=where)
    return check_prompt_id(value[0], f"{where}.prompt_id"), check_version(value[1], f"{where}.version")


def check_description(value: object, where: str = "description") -> str:
    if not isinstance(value, str):
        raise ValidationError("must be a string", where=where)
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise ValidationError(f"longer than {MAX_DESCRIPTION_CHARS} characters", where=where)
    return check_text(value, where) if value else value


def check_prompt_text(value: object, where: str = "text") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("must be non-empty text", where=where)
    if len(value) > MAX_PROMPT_CHARS:
        raise ValidationError(f"longer than {MAX_PROMPT_CHARS} characters", where=where)
    return check_text(value, where)


def check_page(limit: object, offset: object, *, most: int = MAX_PAGE) -> tuple[int, int]:
    return check_int(limit, "limit", 1, most), check_int(offset, "offset", 0, MAX_OFFSET)


def check_ids(value: Sequence[str] | None, where: str, *, names: bool = False) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise ValidationError("must be a list of ids, not one string", where=where)
    items = list(value)
    if len(items) > MAX_FILTER_IDS:
        raise ValidationError(f"at most {MAX_FILTER_IDS} ids", where=where)
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ValidationError(f"ids are strings, not {item!r}", where=f"{where}[{i}]")
        out.append(check_stored_name(item, f"{where}[{i}]") if names else check_text(item, f"{where}[{i}]"))
    return tuple(dict.fromkeys(out))


def _time(value: datetime | str | float | None, where: str) -> datetime | None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError("must be a finite time", where=where)
    return coerce_time(value, where=where)


def check_filters(filters: Filters | None) -> Filters | None:
    """The filters, each rule checked (``filters.<field>`` names a bad one); None or no rule: None."""
    if filters is None:
        return None
    if not isinstance(filters, Filters):
        raise ValidationError("must be a Filters", where="filters")
    kinds = filters.kinds
    if kinds is not None:
        try:
            kinds = frozenset(BlockKind(k) for k in kinds)
        except ValueError:
            valid = ", ".join(k.value for k in BlockKind)
            raise ValidationError(f"kinds are {valid}", where="filters.kinds") from None
    if filters.prompt_version is not None and filters.prompt_id is None:
        raise ValidationError("needs filters.prompt_id", where="filters.prompt_version")
    if not isinstance(filters.annotations_after_cut, bool):
        raise ValidationError("must be true or false", where="filters.annotations_after_cut")
    out = Filters(
        sessions=check_ids(filters.sessions, "filters.sessions", names=True),
        block_ids=check_ids(filters.block_ids, "filters.block_ids"),
        annotations=check_filter_annotations(filters.annotations, "filters.annotations"),
        annotations_after_cut=filters.annotations_after_cut,
        kinds=kinds,
        ingested_after=_time(filters.ingested_after, "filters.ingested_after"),
        ingested_before=_time(filters.ingested_before, "filters.ingested_before"),
        prompt_id=None if filters.prompt_id is None else check_prompt_id(filters.prompt_id, "filters.prompt_id"),
        prompt_version=check_version(filters.prompt_version, "filters.prompt_version"),
    )
    return None if out.empty else out
