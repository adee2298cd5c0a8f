"""The errors :class:`~memlane.client.Client` raises: the core's own where they mean the same thing, and a
small tree for what only a remote call can meet. Every one is a :class:`MemlaneError`.

MemlaneError
├── ValidationError (core)          422 / 400: bad input; ``where`` names the field
│   └── PayloadTooLargeError        413: the request body is over the server's limit
├── NotFoundError (core)            404: no such block or user in the caller's namespace
├── ConfigError (core)              400 config_error: the server is not set up for this (extract="sync"
│                                   without an LLM)
├── LLMError (core)                 502: the server's LLM call failed
├── ConflictError (core)            409: the user was deleted while the add was in flight (nothing stored)
│   ├── AlreadyExistsError (core)   409 already_exists: a user, session or prompt id that is taken
│   ├── SessionEndedError (core)    409 session_ended: a write into an ended session, or ending it twice
│   └── PromptArchivedError (core)  409 prompt_archived: using or updating an archived prompt
└── APIError                        any other failure; ``status`` (0 without a response) and ``code``
    ├── AuthenticationError         401: no key, or an unknown or revoked one
    ├── PermissionDeniedError       403: a valid key that may not do this (a user key on an admin route)
    ├── ServiceUnavailableError     503: the server's store or embedder failed (the message says why:
    │   │                           disk full, read-only, locked, unreachable); worth a retry
    │   └── StoreCorruptError       503 store_corrupt: the store is damaged; a retry will not help
    └── TransportError              no response: connection refused, timeout, broken connection
"""

from __future__ import annotations

from memlane.core.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    LLMError,
    MemlaneError,
    NotFoundError,
    PromptArchivedError,
    SessionEndedError,
    ValidationError,
)

__all__ = [
    "APIError",
    "AlreadyExistsError",
    "AuthenticationError",
    "ConfigError",
    "ConflictError",
    "LLMError",
    "MemlaneError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PromptArchivedError",
    "ServiceUnavailableError",
    "SessionEndedError",
    "StoreCorruptError",
    "TransportError",
    "ValidationError",
    "error_from_response",
]


class APIError(MemlaneError):
    """A failed call with no more specific type. ``status`` is the HTTP status (0: no response)."""

    def __init__(self, message: str, *, status: int = 0, code: str = "error") -> None:
        self.status = status
        self.code = code
        super().__init__(message)


class AuthenticationError(APIError):
    """401: no key, or an unknown or revoked one."""


class PermissionDeniedError(APIError):
    """403: the key is valid but may not do this."""


class ServiceUnavailableError(APIError):
    """503: the server's store or embedder failed."""


class StoreCorruptError(ServiceUnavailableError):
    """503 ``store_corrupt``: the server's store found a damaged page; retrying will not help (its operator
    must check the store and restore it from a backup)."""


class TransportError(APIError):
    """No response: the connection failed or timed out."""


class PayloadTooLargeError(ValidationError):
    """413: the request body is over the server's limit."""


def error_from_response(status: int, code: str, message: str, field: str | None) -> MemlaneError:
    """The exception for an error response (``{"error": {"code", "message", "field"?}}``)."""
    if code == "validation_error" or (code == "bad_request" and status == 400):
        # The server's message starts with the field; ValidationError puts it back in front.
        prefix = f"{field}: "
        bare = message[len(prefix) :] if field and message.startswith(prefix) else message
        return ValidationError(bare, where=field)
    if status == 413:
        return PayloadTooLargeError(message)
    if code == "not_found" or status == 404:
        return NotFoundError(message)
    if code == "config_error":
        return ConfigError(message)
    if code == "already_exists":
        return AlreadyExistsError("", "", message)
    if code == "session_ended":
        return SessionEndedError("", "", message)
    if code == "prompt_archived":
        err = PromptArchivedError("")
        err.args = (message,)
        return err
    if code == "conflict" or status == 409:
        return ConflictError(message)
    if code == "llm_error":
        return LLMError(message)
    if code == "store_corrupt":
        return StoreCorruptError(message, status=status, code=code)
    kind: type[APIError] = {
        401: AuthenticationError,
        403: PermissionDeniedError,
        503: ServiceUnavailableError,
    }.get(status, APIError)
    return kind(message, status=status, code=code)
