"""How a core error reads at the network edges: its HTTP status and stable code, and the general words a 5xx
body (or an MCP tool error) says instead of the exception's own text, which names files, hosts and SQL.
The table is in ``memlane.interfaces.http.errors``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memlane.core.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    EmbedderError,
    LLMError,
    MemlaneError,
    NotFoundError,
    PromptArchivedError,
    QueueFullError,
    SessionEndedError,
    StoreError,
    ValidationError,
)

# The status of each core error; the first match in order wins (subclasses before their bases).
CORE_STATUS: tuple[tuple[type[MemlaneError], int, str], ...] = (
    (ValidationError, 422, "validation_error"),
    (NotFoundError, 404, "not_found"),
    (AlreadyExistsError, 409, "already_exists"),
    (SessionEndedError, 409, "session_ended"),
    (PromptArchivedError, 409, "prompt_archived"),
    (ConflictError, 409, "conflict"),
    (ConfigError, 400, "config_error"),
    (QueueFullError, 429, "queue_full"),
    (LLMError, 502, "llm_error"),
    (StoreError, 503, "unavailable"),
    (EmbedderError, 503, "unavailable"),
)
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
    422: "validation_error",
}
# What a 5xx body says of each failure: general words, never the exception's text.
PUBLIC_FAILURE = {
    StoreError: "the store is unavailable",
    EmbedderError: "the embedder is unavailable",
    LLMError: "the LLM call failed",
}
# A store that found a damaged page: not a passing condition, so the answer says so instead of "unavailable".
CORRUPT = "corrupt"
CORRUPT_CODE = "store_corrupt"
CORRUPT_MESSAGE = (
    "the store is corrupt: a damaged database page was found, and retrying will not help; the operator must "
    "run `memlane check` and restore the store from a backup"
)
# Addresses an error text may carry (the LLM server's URL in a transport error, hosts and ports in a
# server's reply): what a user's key is not shown.
_ADDRESSES = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+"  # URLs
    r"|\[[0-9A-Fa-f:.]+\](?::\d+)?"  # [IPv6]:port
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"  # IPv4:port
    r"|\b(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{1,5}\b"  # host:port
)


def scrub_addresses(text: str) -> str:
    """``text`` with every URL, IP address and host:port replaced by ``<address>``."""
    return _ADDRESSES.sub("<address>", text)


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a store failure on a damaged database (SQLite's SQLITE_CORRUPT, PostgreSQL's
    data or index corruption)."""
    return isinstance(exc, StoreError) and exc.reason == CORRUPT


# A server's caller cannot pass Memory(llm=...) or --llm: say which of the server's settings give it an LLM.
NO_LLM_FOR_SYNC = (
    "extract 'sync' needs an LLM and this server has none: whoever runs it sets MEMLANE_LLM_BASE_URL, "
    "MEMLANE_LLM_MODEL and MEMLANE_LLM_API_KEY (or MEMLANE_LLM=scripted for the offline fake) before "
    "`memlane serve`; meanwhile send extract 'async' (queued for a worker that has an LLM) or 'off'"
)


def check_extract(extract: str, has_llm: bool) -> None:
    """ConfigError (400) for a synchronous extraction asked of a server without an LLM, naming the server's
    settings rather than the Python arguments the core's own message names."""
    if extract == "sync" and not has_llm:
        raise ConfigError(NO_LLM_FOR_SYNC)


def error_body(code: str, message: str, field: str | None = None, *, request_id: str | None = None) -> dict[str, Any]:
    """The JSON body of every error response. ``detail`` says the same in the Agent Memory API's flat shape:
    that API's clients unwrap a ``detail`` object and read a string ``error`` there, so one given a base URL
    that reaches these routes (one ending in ``/v1``, or a server with that API turned off) gets a readable
    error instead of failing on the nested object."""
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    if request_id is not None:
        err["request_id"] = request_id
    flat = {"error": code.upper(), "message": message, "details": {} if field is None else {"field": field}}
    return {"error": err, "detail": {**flat, "request_id": request_id}}


def public_message(exc: MemlaneError, request_id: str | None) -> str:
    """What a 5xx body says of ``exc``: its kind of failure, a safe reason if it has one (disk full,
    read-only, locked, ...; a corrupt store in words of its own), where to look."""
    if is_corrupt(exc):
        text = CORRUPT_MESSAGE
    else:
        text = next((m for kind, m in PUBLIC_FAILURE.items() if isinstance(exc, kind)), "internal error")
        reason = getattr(exc, "reason", None)
        if isinstance(reason, str) and reason:
            text += f": {reason}"
    return f"{text} (the server log has the details under request id {request_id})" if request_id else text


def core_status(exc: MemlaneError) -> tuple[int, str]:
    """HTTP status and error code of a core error (a corrupt store: 503 ``store_corrupt``)."""
    if is_corrupt(exc):
        return 503, CORRUPT_CODE
    for kind, status, code in CORE_STATUS:
        if isinstance(exc, kind):
            return status, code
    return 500, "internal_error"


@contextmanager
def field_renamed(old: str, new: str) -> Iterator[None]:
    """A ValidationError raised inside about the core's argument ``old`` (``pairs[0]``) names the field
    the caller sent instead (``exchanges[0]``)."""
    try:
        yield
    except ValidationError as exc:
        where = exc.where
        if where is None or not (where == old or where.startswith((f"{old}[", f"{old}."))):
            raise
        text = str(exc)
        message = text[len(where) + 2 :] if text.startswith(f"{where}: ") else text
        raise ValidationError(message, where=new + where[len(old) :]) from None
