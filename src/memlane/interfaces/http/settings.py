"""Settings of the HTTP service, built once at the edge. No web framework is imported here, so the CLI can
read the defaults without loading one."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """``max_body_bytes``: larger request bodies are refused with 413 before they are read."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
