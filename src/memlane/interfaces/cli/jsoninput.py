"""JSON read from a file or stdin, refused with a one-line message that says where when it is not usable.

Bytes that are not UTF-8 (line, column), JSON that does not parse (line, column), nesting deeper than any
message list needs (line, column: deep nesting would otherwise exhaust Python's recursion), ``NaN`` and
``Infinity`` (not JSON, though Python's parser takes them) and numbers too long to convert are all a
:class:`ValidationError` naming the file or ``stdin``. A UTF-8 byte order mark is skipped.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from pathlib import Path
from typing import Any, BinaryIO

from memlane.core.errors import ValidationError

# A message list is three levels deep; a little room for future shapes, far below the recursion limit.
MAX_JSON_DEPTH = 32
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class _Constant(ValueError):
    """NaN, Infinity or -Infinity in the input."""


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line} column {column}"


def _check_depth(data: bytes, where: str) -> None:
    depth = 0
    for m in _TOKENS.finditer(data):
        token = m.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise ValidationError(
                    f"JSON nested deeper than {MAX_JSON_DEPTH} levels at {_position(data, m.start())}", where=where
                )
        elif token in (b"]", b"}"):
            depth -= 1


def parse_json_bytes(data: bytes, where: str) -> Any:
    """The JSON value in ``data``, or a ValidationError naming ``where`` and the line and column."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.end].hex(" ")
        raise ValidationError(f"not UTF-8: byte {bad} at {_position(data, exc.start)}", where=where) from None
    _check_depth(data, where)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", where=where) from None
    except _Constant as exc:
        raise ValidationError(f"not JSON: {exc} is not a JSON value", where=where) from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            limit = sys.get_int_max_str_digits()
            raise ValidationError(f"not JSON: a number longer than {limit} digits", where=where) from None
        raise ValidationError(f"not JSON: {exc}", where=where) from None
    except RecursionError:  # only if the depth scan above missed a case
        raise ValidationError("not JSON: nested too deeply", where=where) from None


def read_json(file: Path | None, stdin: BinaryIO) -> Any:
    """The JSON value in ``file``, else in ``stdin`` (bytes)."""
    where = str(file) if file else "stdin"
    try:
        data = file.read_bytes() if file else stdin.read()
    except OSError as exc:
        raise ValidationError(f"cannot read: {exc.strerror or exc}", where=where) from None
    return parse_json_bytes(data, where)
