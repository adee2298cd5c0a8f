"""Read a model's JSON reply and check its shape against a small JSON Schema subset.

Supported keywords: ``type`` (``object``, ``array``, ``string``, ``number``, ``integer``, ``boolean``,
``null``, or a list of these), ``properties``, ``required``, ``items``, ``additionalProperties`` (``false``,
``true`` or a schema) and ``enum``. Other keywords (``description``, ``title``, ...) are accepted and
ignored, so the same schema can be sent to a server that enforces more of it.

A reply is read leniently where that loses nothing: properties that ``additionalProperties: false`` forbids
are removed and reported (:func:`decode_json`), not refused, since models in JSON mode often add a key of
their own beside the ones asked for. A missing or mistyped property is still an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from memlane.core.errors import LLMResponseError, ValidationError
from memlane.core.llm.protocol import JSONSchema, JSONValue

TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)
_MAX_ERRORS = 5


def check_schema(schema: JSONSchema, where: str = "schema") -> None:
    """Raise ValidationError if ``schema`` uses the supported keywords wrongly (a caller's bug)."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for k in kinds:
        if k not in TYPES:
            raise ValidationError(f"unsupported type {k!r}; use one of {sorted(TYPES)}", where=f"{where}.type")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise ValidationError("properties must be an object", where=f"{where}.properties")
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            raise ValidationError("a property schema must be an object", where=f"{where}.properties.{name}")
        check_schema(sub, f"{where}.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValidationError("required must be a list of names", where=f"{where}.required")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            check_schema(sub, f"{where}.{key}")
        elif sub is not None and not (key == "additionalProperties" and isinstance(sub, bool)):
            raise ValidationError("must be a schema object", where=f"{where}.{key}")
    enum = schema.get("enum")
    if enum is not None and not isinstance(enum, list):
        raise ValidationError("enum must be a list", where=f"{where}.enum")


def shape_errors(value: JSONValue, schema: JSONSchema, path: str = "$") -> list[str]:
    """List where ``value`` breaks ``schema`` (JSON paths such as ``$.facts[2]``); empty when it fits."""
    errors: list[str] = []
    _check(value, schema, path, errors)
    return errors[:_MAX_ERRORS]


def _check(value: JSONValue, schema: JSONSchema, path: str, errors: list[str]) -> None:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if kinds and not any(_is_type(value, str(k)) for k in kinds):
        errors.append(f"{path}: expected {' or '.join(map(str, kinds))}, got {_type_name(value)}")
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        errors.append(f"{path}: {value!r} is not one of {enum!r}")
    if isinstance(value, dict):
        _check_object(value, schema, path, errors)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _check(item, items, f"{path}[{i}]", errors)


def _check_object(value: dict[str, JSONValue], schema: JSONSchema, path: str, errors: list[str]) -> None:
    props = schema.get("properties", {})
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required", [])
    for name in required if isinstance(required, list) else []:
        if name not in value:
            errors.append(f"{path}: missing required property {name!r}")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        sub = props.get(name)
        if isinstance(sub, Mapping):
            _check(item, sub, f"{path}.{name}", errors)
        elif extra is False:
            errors.append(f"{path}: unexpected property {name!r}")
        elif isinstance(extra, Mapping):
            _check(item, extra, f"{path}.{name}", errors)


def _is_type(value: JSONValue, kind: str) -> bool:
    # bool is an int subclass in Python but never a number in JSON.
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "boolean": bool,
        "null": type(None),
    }
    return isinstance(value, expected[kind])


def _type_name(value: JSONValue) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def parse_json_reply(text: str) -> JSONValue:
    """Decode a reply that should be JSON, tolerating what small models wrap around it.

    Tries, in order: the whole text; the first fenced block (```json ... ```); the span from the first
    ``{`` or ``[`` to the last matching closer. Raises ``ValueError`` with the decoder's message.
    """
    candidates = [text.strip()]
    fence = _FENCE.search(text)
    if fence:
        candidates.append(fence.group(1).strip())
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    first_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            value: JSONValue = json.loads(candidate)
            return value
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
    raise ValueError(f"not valid JSON: {first_error}")


def strip_extra(value: JSONValue, schema: JSONSchema, path: str = "$") -> tuple[JSONValue, list[str]]:
    """``value`` without the object properties that ``schema`` forbids (``additionalProperties: false``),
    and the JSON paths of what was removed."""
    removed: list[str] = []
    if isinstance(value, dict) and _is_type(value, "object"):
        props = schema.get("properties", {})
        props = props if isinstance(props, Mapping) else {}
        kept: dict[str, JSONValue] = {}
        for name, item in value.items():
            sub = props.get(name)
            if isinstance(sub, Mapping):
                kept[name], inner = strip_extra(item, sub, f"{path}.{name}")
                removed += inner
            elif schema.get("additionalProperties", True) is False:
                removed.append(f"{path}.{name}")
            else:
                kept[name] = item
        return kept, removed
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        out: list[JSONValue] = []
        for i, item in enumerate(value):
            stripped, inner = strip_extra(item, items, f"{path}[{i}]")
            out.append(stripped)
            removed += inner
        return out, removed
    return value, removed


def decode_json(text: str, schema: JSONSchema | None) -> tuple[JSONValue, list[str]]:
    """Parse ``text``, drop the properties ``schema`` forbids, check the rest against ``schema``; returns the
    value and the paths of the dropped properties. Raises LLMResponseError (with ``raw``) if it fails."""
    try:
        value = parse_json_reply(text)
    except ValueError as exc:
        raise LLMResponseError(str(exc), raw=text) from None
    if schema is None:
        return value, []
    value, extra = strip_extra(value, schema)
    errors = shape_errors(value, schema)
    if errors:
        raise LLMResponseError("reply has the wrong shape: " + "; ".join(errors), raw=text)
    return value, extra


def decode_reply(text: str, schema: JSONSchema | None) -> JSONValue:
    """:func:`decode_json` without the list of dropped properties."""
    return decode_json(text, schema)[0]


def json_instruction(schema: JSONSchema | None) -> str:
    """The sentence appended to a JSON request, so the model is asked even where it is not constrained."""
    text = "Reply with one JSON value and nothing else: no prose, no code fences."
    if schema is not None:
        text += " It must conform to this JSON Schema:\n" + json.dumps(schema, sort_keys=True)
    return text
