"""Parsing model replies as JSON and the built-in schema-subset checker."""

from __future__ import annotations

import pytest

from memlane.core.errors import LLMResponseError, ValidationError
from memlane.core.llm.jsonshape import check_schema, decode_reply, parse_json_reply, shape_errors
from memlane.core.llm.protocol import JSONValue

FACTS = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "facts": {"type": "array", "items": {"type": "string"}},
        "confidence": {"type": "number"},
        "count": {"type": "integer"},
        "urgent": {"type": "boolean"},
        "kind": {"type": "string", "enum": ["event", "preference"]},
        "note": {"type": ["string", "null"]},
    },
    "required": ["summary", "facts"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '  {"a": 1}\n',
        '```json\n{"a": 1}\n```',
        '```\n{"a": 1}\n```',
        'Here is the JSON:\n```json\n{"a": 1}\n```\nDone.',
        'Sure! {"a": 1} Anything else?',
    ],
)
def test_parse_tolerates_fences_and_prose(text: str) -> None:
    assert parse_json_reply(text) == {"a": 1}


def test_parse_arrays_and_failures() -> None:
    assert parse_json_reply('The facts: ["x", "y"]') == ["x", "y"]
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_json_reply('{"a": ')
    with pytest.raises(ValueError):
        parse_json_reply("")


def test_a_fitting_value_has_no_errors() -> None:
    value: JSONValue = {
        "summary": "s",
        "facts": ["a", "b"],
        "confidence": 1,
        "count": 2.0,
        "urgent": False,
        "kind": "event",
        "note": None,
    }
    assert shape_errors(value, FACTS) == []


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ([], "$: expected object, got array"),
        ({"facts": []}, "$: missing required property 'summary'"),
        ({"summary": "s", "facts": ["a", 3]}, "$.facts[1]: expected string, got integer"),
        ({"summary": "s", "facts": [], "count": True}, "$.count: expected integer, got boolean"),
        ({"summary": "s", "facts": [], "count": 1.5}, "$.count: expected integer, got number"),
        ({"summary": "s", "facts": [], "confidence": "high"}, "$.confidence: expected number, got string"),
        ({"summary": "s", "facts": [], "urgent": 1}, "$.urgent: expected boolean, got integer"),
        ({"summary": "s", "facts": [], "kind": "other"}, "$.kind: 'other' is not one of ['event', 'preference']"),
        ({"summary": "s", "facts": [], "note": 1}, "$.note: expected string or null, got integer"),
        ({"summary": "s", "facts": [], "extra": 1}, "$: unexpected property 'extra'"),
    ],
)
def test_shape_errors_name_the_path(value: JSONValue, error: str) -> None:
    assert shape_errors(value, FACTS) == [error]


def test_additional_properties_schema_and_nesting() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}}
    assert shape_errors({"a": [1, 2], "b": []}, schema) == []
    assert shape_errors({"a": [1, "x"]}, schema) == ["$.a[1]: expected integer, got string"]
    assert shape_errors({"anything": 1}, {"type": "object"}) == []


def test_decode_reply_raises_with_raw() -> None:
    assert decode_reply('{"summary": "s", "facts": []}', FACTS) == {"summary": "s", "facts": []}
    assert decode_reply("[1]", None) == [1]
    with pytest.raises(LLMResponseError) as caught:
        decode_reply('{"summary": 1}', FACTS)
    assert caught.value.raw == '{"summary": 1}'
    assert "wrong shape" in str(caught.value)


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "text"}, "schema.type"),
        ({"properties": []}, "schema.properties"),
        ({"properties": {"a": {"type": "str"}}}, "schema.properties.a.type"),
        ({"required": "a"}, "schema.required"),
        ({"items": "string"}, "schema.items"),
        ({"additionalProperties": "no"}, "schema.additionalProperties"),
        ({"enum": "a"}, "schema.enum"),
    ],
)
def test_check_schema_rejects_misuse(schema: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_schema(schema)
    assert caught.value.where == where


def test_check_schema_accepts_the_subset_and_ignores_other_keywords() -> None:
    check_schema(FACTS)
    check_schema({"type": "object", "title": "x", "description": "y", "minItems": 3})
