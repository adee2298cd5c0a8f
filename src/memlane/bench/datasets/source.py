"""Reading source files: (possibly xz-compressed) byte streams, streaming digests, field checks."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path
from typing import IO

from memlane.core.errors import ValidationError

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """Hex sha256 of the file's bytes as stored (for ``.xz`` files: of the compressed bytes)."""
    if not path.is_file():
        raise ValidationError("file not found", where=str(path))
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def content_sha256(path: Path, stored: str | None = None) -> str:
    """Hex sha256 of the file's content: of the decompressed bytes for ``.xz`` files, else of the bytes as
    stored (``stored``, when the caller has it already, saves reading a plain file twice)."""
    if not path.name.endswith(".xz"):
        return stored or file_sha256(path)
    digest = hashlib.sha256()
    try:
        with open_source(path) as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except (lzma.LZMAError, EOFError) as exc:
        raise ValidationError(f"corrupt xz archive: {exc}", where=str(path)) from None
    return digest.hexdigest()


def open_source(path: Path) -> IO[bytes]:
    """Open ``path`` for binary reading, decompressing on the fly when its name ends in ``.xz``."""
    if not path.is_file():
        raise ValidationError("file not found", where=str(path))
    if path.name.endswith(".xz"):
        return lzma.open(path, "rb")
    return path.open("rb")


def where(path: Path, item: str | None = None, field: str | None = None) -> str:
    """Location string ``"<file>: <item>: field <field>"`` for error messages."""
    parts = [str(path)]
    if item:
        parts.append(item)
    if field:
        parts.append(f"field {field}")
    return ": ".join(parts)


def require(obj: object, key: str, loc: str) -> object:
    """``obj[key]`` of a JSON object, or a ValidationError saying which field is missing."""
    if not isinstance(obj, dict):
        raise ValidationError(f"expected a JSON object, got {type(obj).__name__}", where=loc)
    if key not in obj:
        raise ValidationError(f"missing field {key!r}", where=loc)
    return obj[key]


def as_str(value: object, loc: str) -> str:
    """``value`` if it is a string, else a ValidationError."""
    if not isinstance(value, str):
        raise ValidationError(f"expected a string, got {type(value).__name__} {value!r:.60}", where=loc)
    return value


def as_list(value: object, loc: str) -> list[object]:
    """``value`` if it is a JSON array, else a ValidationError."""
    if not isinstance(value, list):
        raise ValidationError(f"expected a list, got {type(value).__name__}", where=loc)
    return value


def as_answer(value: object, loc: str) -> str:
    """Gold answers are strings, but some are JSON integers (both data sets): cast those to ``str``."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValidationError(
            f"expected a string or integer answer, got {type(value).__name__} {value!r:.60}", where=loc
        )
    return str(value)
