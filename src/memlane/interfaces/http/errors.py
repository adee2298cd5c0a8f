"""The one place where errors become HTTP responses.

Every error body has the same shape, whatever raised it (the core, request validation, auth, routing)::

    {"error": {"code": "validation_error", "message": "messages[0].content: empty content",
               "field": "messages[0].content", "request_id": "5f0c..."}}

``code`` is stable and what clients branch on; ``field`` names the offending input when there is one;
``request_id`` is also the ``X-Request-ID`` response header. A 5xx body says what failed in general words
only ("the store is unavailable: disk full"): the exception's own text names files, hosts and SQL, and goes
to the server log, on a line that carries the same request id.

============================  ======  ======================
raised                        status  code
============================  ======  ======================
ValidationError, bad request  422     validation_error
malformed JSON                400     bad_request
NotFoundError, unknown route  404     not_found
AlreadyExistsError            409     already_exists
SessionEndedError             409     session_ended
PromptArchivedError           409     prompt_archived
ConflictError (others)        409     conflict
ConfigError                   400     config_error
no or unknown key             401     unauthorized
key of the wrong scope        403     forbidden
body over the limit           413     payload_too_large
Host not allowed              421     misdirected_request
body not sent in time         408     request_timeout
LLMError                      502     llm_error
StoreError (corrupt)          503     store_corrupt
StoreError, EmbedderError     503     unavailable
anything else                 500     internal_error
============================  ======  ======================
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memlane.core.errors import MemlaneError, ValidationError
from memlane.interfaces.wire.errors import (
    CORE_STATUS,
    HTTP_CODES,
    PUBLIC_FAILURE,
    core_status,
    error_body,
    is_corrupt,
    public_message,
)
from memlane.interfaces.wire.requestid import request_id_of

log = logging.getLogger("memlane.http")
__all__ = [
    "CORE_STATUS",
    "HTTP_CODES",
    "PUBLIC_FAILURE",
    "AuthError",
    "core_status",
    "error_body",
    "error_response",
    "field_path",
    "install_error_handlers",
    "public_message",
]


class AuthError(Exception):
    """No key, an unknown key (401) or a key that may not do this (403); ``code`` names why more precisely
    where a client branches on it (an expired token)."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        self.status = status
        self.code = code
        super().__init__(message)


def error_response(
    status: int, code: str, message: str, field: str | None = None, *, request: Request | None = None
) -> JSONResponse:
    rid = request_id_of(request) if request is not None else None
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if rid is not None:
        # Set here too: a 500 is answered from outside the middleware that adds the header.
        headers["X-Request-ID"] = rid
    return JSONResponse(error_body(code, message, field, request_id=rid), status_code=status, headers=headers)


# FastAPI's words for a body whose parsing raised something other than a JSON syntax error: nesting
# deeper than the parser's recursion limit, or an integer of more digits than Python converts.
_UNPARSED = "There was an error parsing the body"


def _bad_json(reason: str) -> str:
    """The one message of every body that is not JSON memlane can read."""
    return f"body is not valid JSON: {reason} (send a JSON body, Content-Type: application/json)"


def _unparsed_reason(exc: StarletteHTTPException) -> str:
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        return "nested too deeply"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "a number with too many digits"
    return "it cannot be read"


# Starlette's words when no route serves the path (404) or the method (405).
_UNROUTED = {404: "Not Found", 405: "Method Not Allowed"}


def _unrouted(request: Request, exc: StarletteHTTPException, no_route: Callable[[str], str] | None) -> str:
    path = request.url.path
    if exc.status_code == 405:
        # Not Starlette's Allow header: it names the methods of one of the path's routes only.
        text = f"{request.method} is not allowed on {path}"
    else:
        text = f"no route {request.method} {path}"
    hint = no_route(path) if no_route is not None else ""
    return f"{text}: {hint}" if hint else text


def field_path(loc: Sequence[int | str]) -> str:
    """``("body", "messages", 0, "content")`` -> ``messages[0].content``: the name a client sent."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def install_error_handlers(app: FastAPI, no_route: Callable[[str], str] | None = None) -> None:
    """Route every exception through the table above. ``no_route(path)``: what the answer to a path or a
    method no route serves adds to say where the caller should look."""

    @app.exception_handler(MemlaneError)
    async def on_core_error(request: Request, exc: MemlaneError) -> JSONResponse:
        status, code = core_status(exc)
        if status >= 500:
            rid = request_id_of(request)
            log.error("request %s: %s %s: %s: %s", rid, request.method, request.url.path, type(exc).__name__, exc)
            if is_corrupt(exc):
                # /healthz says so from now on, not only at the next scheduled check.
                request.app.state.services.integrity.mark_corrupt(f"{request.method} {request.url.path}: {exc}")
            return error_response(status, code, public_message(exc, rid), request=request)
        where = exc.where if isinstance(exc, ValidationError) else None
        return error_response(status, code, str(exc), where, request=request)

    @app.exception_handler(AuthError)
    async def on_auth_error(request: Request, exc: AuthError) -> JSONResponse:
        return error_response(exc.status, HTTP_CODES[exc.status], str(exc), request=request)

    @app.exception_handler(RequestValidationError)
    async def on_request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        if not errors:
            return error_response(422, "validation_error", "invalid request", request=request)
        first = errors[0]
        if first.get("type") == "json_invalid":
            return error_response(400, "bad_request", _bad_json(str(first.get("msg"))), "body", request=request)
        where = field_path(first.get("loc", ()))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        return error_response(422, "validation_error", f"{where}: {msg}{more}", where, request=request)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _UNPARSED:
            return error_response(400, "bad_request", _bad_json(_unparsed_reason(exc)), "body", request=request)
        code = HTTP_CODES.get(exc.status_code, "error")
        message = str(exc.detail)
        if _UNROUTED.get(exc.status_code) == exc.detail:
            message = _unrouted(request, exc, no_route)
        response = error_response(exc.status_code, code, message, request=request)
        if exc.status_code in (408, 413):
            # The client may still be sending the body that will not be read.
            response.headers["Connection"] = "close"
        return response

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug: logged with its traceback and the request id; the client gets no internals.
        rid = request_id_of(request)
        log.exception("request %s: %s %s: unhandled error", rid, request.method, request.url.path)
        message = f"internal error (the server log has the details under request id {rid})"
        return error_response(500, "internal_error", message, request=request)
