"""The Agent Memory error envelope: a flat object with a string code, on these routes only.

::

    {"error": "SESSION_ALREADY_ENDED", "message": "session 'conv-1' has ended", "details": {},
     "request_id": "5f0c..."}

Clients of that API read ``error`` as a string (memlane's own ``/v1`` body nests an object there, which they
cannot use), so every answer of these routes that is not a success has this shape: the core's errors
(:func:`core_error`), request validation, auth, and, through :class:`FlatErrorMiddleware`, what the app
answers before a route runs (an unknown path or method, a body over the limit, a Host not allowed).

============================================  ======  =====================================
raised                                        status  error
============================================  ======  =====================================
malformed JSON, a body of the wrong shape     422     ``INVALID_REQUEST``
ValidationError (a field the core refuses)    400     ``INVALID_REQUEST``
a path id with ``/ ? # %``, ``.`` or ``..``   400     ``INVALID_REQUEST``
no key, an unknown key                        401     ``INVALID_TOKEN``
a key that may not do this                    403     ``FORBIDDEN``
NotFoundError                                 404     ``<WHAT>_NOT_FOUND`` (``USER``, ``SESSION``, ...)
SessionEndedError                             400     ``SESSION_ALREADY_ENDED``
ConflictError                                 409     ``CONFLICT`` (``ALREADY_EXISTS``, ...)
the extraction queue is full                  429     ``QUEUE_FULL`` (``Retry-After``)
ConfigError                                   400     ``CONFIG_ERROR``
LLMError                                      502     ``UPSTREAM_ERROR`` (``details.service``)
StoreError                                    503     ``DATABASE_UNAVAILABLE`` (``details.service``)
EmbedderError                                 503     ``EMBEDDING_UNAVAILABLE`` (``details.service``)
anything else                                 500     ``INTERNAL_ERROR``
============================================  ======  =====================================
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.core.errors import (
    ConfigError,
    ConflictError,
    EmbedderError,
    LLMError,
    MemlaneError,
    NotFoundError,
    QueueFullError,
    StoreError,
    ValidationError,
)
from memlane.interfaces.http.errors import AuthError, field_path
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.errors import is_corrupt, public_message
from memlane.interfaces.wire.requestid import request_id_of

log = logging.getLogger("memlane.http")

# The paths these routes answer: an error under them has the flat shape whatever raised it.
PREFIXES = ("/users", "/prompts", "/health")


def serves(path: str) -> bool:
    """Whether ``path`` is one of the Agent Memory routes' (``/healthz`` and ``/v1/...`` are not)."""
    return any(path == p or path.startswith(p + "/") for p in PREFIXES)


def no_route(path: str, *, api_on: bool) -> str:
    """What an answer to a path no route serves adds, for a client pointed at the wrong place: that API's
    clients take the server's URL without ``/v1``, and that API can be turned off."""
    off = "the Agent Memory API is turned off on this server (memlane serve --no-agent-memory-api)"
    if serves(path):
        return "" if api_on else f"{off}; memlane's own API is under /v1 (docs/http.md)"
    if path.startswith("/v1/") and serves(path.removeprefix("/v1")):
        where = "memlane serves that API at the server's root, so its clients take the server's URL without /v1"
        return f"that is an Agent Memory API path under /v1: {where if api_on else off}"
    root = "; the Agent Memory API is at the server's root (/users, /prompts, /health)" if api_on else ""
    return f"memlane's own API is under /v1 (docs/http.md){root}"


class ApiError(Exception):
    """An answer of these routes that is not a success, with its status, code, details and headers."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = dict(details or {})
        self.headers = dict(headers or {})


def envelope(code: str, message: str, details: Mapping[str, Any] | None, request_id: str | None) -> dict[str, Any]:
    return {"error": code, "message": message, "details": dict(details or {}), "request_id": request_id}


def error_response(err: ApiError, request: Request) -> JSONResponse:
    rid = request_id_of(request)
    headers = dict(err.headers)
    if err.status == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
    if rid is not None:
        headers["X-Request-ID"] = rid
    return JSONResponse(envelope(err.code, err.message, err.details, rid), status_code=err.status, headers=headers)


# How long a client is told to wait when the extraction queue is full.
QUEUE_FULL_RETRY_AFTER_S = 5

# What a core NotFoundError names first ("session 's1' not found for user 'alice'"): its code here.
_NOT_FOUND_CODES = {"user": "USER_NOT_FOUND", "session": "SESSION_NOT_FOUND", "block": "BLOCK_NOT_FOUND"}
_NOT_FOUND_CODES["prompt"] = "PROMPT_NOT_FOUND"


def _not_found_code(exc: NotFoundError) -> str:
    what = getattr(exc, "what", None) or str(exc).partition(" ")[0]
    return _NOT_FOUND_CODES.get(str(what).lower(), "NOT_FOUND")


def _missing_user(exc: NotFoundError, request: Request) -> NotFoundError:
    """The path's user, when it is what is missing: a session or block of a user that does not exist says
    ``USER_NOT_FOUND``, not that the user has no such session. (The caller may address that user: its
    auth was checked before.)"""
    user = request.path_params.get("user_id")
    if not isinstance(user, str) or _not_found_code(exc) == "USER_NOT_FOUND":
        return exc
    try:
        services(request).memory.get_user(user)
    except NotFoundError as missing:
        return missing
    return exc


# A route's renames of the core's field names into this API's (``ttl_s`` is ``memory_block_ttl``):
# (a pattern on the core's field, its replacement), the first that matches is used.
Renames = tuple[tuple[str, str], ...]


def renamed(*pairs: tuple[str, str]) -> Renames:
    """Renames of whole fields, ``(core, api)``: a path under the field is renamed with it (``pairs[0]``
    under ``pairs``)."""
    return tuple((rf"^{re.escape(core)}(?=$|[.\[])", api) for core, api in pairs)


@contextmanager
def api_fields(renames: Renames) -> Iterator[None]:
    """The core's ValidationErrors raised inside name the field as this API's client sent it."""
    try:
        yield
    except ValidationError as exc:
        where = exc.where
        if where is None:
            raise
        for pattern, api in renames:
            field, found = re.subn(pattern, api, where)
            if found:
                raise ValidationError(str(exc).removeprefix(f"{where}: "), where=field) from None
        raise


def core_error(exc: MemlaneError, request: Request) -> ApiError:
    """The answer to a core error raised by a route."""
    code = getattr(exc, "code", None)
    if code == "SESSION_ALREADY_ENDED":
        return ApiError(400, code, str(exc))
    if isinstance(exc, ValidationError):
        where = exc.where
        return ApiError(400, "INVALID_REQUEST", str(exc), {"field": where} if where else None)
    if isinstance(exc, NotFoundError):
        exc = _missing_user(exc, request)
        return ApiError(404, _not_found_code(exc), str(exc))
    if isinstance(exc, ConflictError):
        return ApiError(409, code if isinstance(code, str) and code.isupper() else "CONFLICT", str(exc))
    if isinstance(exc, ConfigError):
        return ApiError(400, "CONFIG_ERROR", str(exc))
    if isinstance(exc, QueueFullError):
        wait = {"Retry-After": str(QUEUE_FULL_RETRY_AFTER_S)}
        return ApiError(
            429,
            "QUEUE_FULL",
            str(exc),
            {"retry_after_seconds": QUEUE_FULL_RETRY_AFTER_S, "queue_size": exc.queued},
            wait,
        )
    rid = request_id_of(request)
    log.error("request %s: %s %s: %s: %s", rid, request.method, request.url.path, type(exc).__name__, exc)
    if is_corrupt(exc):
        request.app.state.services.integrity.mark_corrupt(f"{request.method} {request.url.path}: {exc}")
    message = public_message(exc, rid)
    if isinstance(exc, LLMError):
        return ApiError(502, "UPSTREAM_ERROR", message, {"service": "llm"})
    if isinstance(exc, StoreError):
        return ApiError(503, "DATABASE_UNAVAILABLE", message, {"service": "database"})
    if isinstance(exc, EmbedderError):
        return ApiError(503, "EMBEDDING_UNAVAILABLE", message, {"service": "embedding"})
    return ApiError(500, "INTERNAL_ERROR", message)


def request_invalid(exc: RequestValidationError) -> ApiError:
    errors = list(exc.errors())
    if not errors:
        return ApiError(422, "INVALID_REQUEST", "invalid request")
    first = errors[0]
    if first.get("type") == "json_invalid":
        return ApiError(422, "INVALID_REQUEST", f"body is not valid JSON: {first.get('msg')}", {"field": "body"})
    # Every problem, in full: the first one's field is ``details.field``.
    problems = [
        f"{field_path(e.get('loc', ()))}: {str(e.get('msg', 'invalid')).removeprefix('Value error, ')}" for e in errors
    ]
    return ApiError(422, "INVALID_REQUEST", "; ".join(problems), {"field": field_path(first.get("loc", ()))})


def _as_api_error(exc: Exception, request: Request) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, MemlaneError):
        return core_error(exc, request)
    if isinstance(exc, RequestValidationError):
        return request_invalid(exc)
    if isinstance(exc, AuthError):
        code = exc.code or ("INVALID_TOKEN" if exc.status == 401 else "FORBIDDEN")
        return ApiError(exc.status, code, str(exc))
    if isinstance(exc, StarletteHTTPException):
        if exc.status_code == 400:
            # FastAPI could not parse the body (nested too deeply, a number of too many digits).
            return ApiError(422, "INVALID_REQUEST", f"body is not valid JSON: {exc.detail}", {"field": "body"})
        return ApiError(exc.status_code, _HTTP_CODES.get(exc.status_code, "ERROR"), str(exc.detail))
    rid = request_id_of(request)
    log.exception("request %s: %s %s: unhandled error", rid, request.method, request.url.path)
    return ApiError(500, "INTERNAL_ERROR", f"internal error (the server log has the details under request id {rid})")


class FlatErrorRoute(APIRoute):
    """A route whose every failure, from its dependencies (auth), its body's validation or the handler,
    answers with the flat envelope instead of reaching the app's (``/v1``) error handlers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def flat(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every failure becomes an answer: this is the routes' error edge
                return error_response(_as_api_error(exc, request), request)

        return flat


_HTTP_CODES = {
    400: "INVALID_REQUEST",
    401: "INVALID_TOKEN",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "REQUEST_TIMEOUT",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    421: "MISDIRECTED_REQUEST",
    422: "INVALID_REQUEST",
    429: "RATE_LIMITED",
}


class FlatErrorMiddleware:
    """Rewrites memlane's nested error body (``{"error": {"code", "message", "field", "request_id"}}``) into
    the flat envelope for the Agent Memory paths, for what is answered before one of their routes runs:
    an unknown path (an id holding ``/``) or method, a body over the size limit, a Host not allowed, a body
    not sent in time. Only error answers are read; a success passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not serves(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def rewrite(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                if int(message["status"]) < 400:
                    start = None
                    await send(message)
                    return
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            status = int(start["status"])
            body = _flatten(b"".join(chunks), status)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewrite)


def _flatten(raw: bytes, status: int) -> bytes:
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and not isinstance(body.get("error"), dict):
        return raw  # already flat, or a route's own answer (a 503 health report)
    nested = body.get("error") if isinstance(body, dict) else None
    if not isinstance(nested, dict):
        text = raw.decode("utf-8", "replace") if raw else "error"
        return json.dumps(envelope(_HTTP_CODES.get(status, "ERROR"), text, None, None)).encode()
    details = {"field": nested["field"]} if nested.get("field") else {}
    code = _HTTP_CODES.get(status) or str(nested.get("code", "error")).upper()
    flat = envelope(code, str(nested.get("message", "")), details, nested.get("request_id"))
    return json.dumps(flat).encode()
