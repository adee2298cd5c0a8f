"""The one exception tree of memlane.

Foreign exceptions (sqlite3, httpx, onnxruntime, json) are translated into these at the boundary where
they enter, and nowhere else.

MemlaneError
├── ValidationError        bad input: says what is wrong and where (field, file, line)
├── NotFoundError          an id that does not exist in the caller's namespace
│   └── StoreNotFoundError a store path or URL where no store exists (and none was to be created)
├── ConflictError          the request lost a race with another that changed the same thing
│   └── UserDeletedError   the user was deleted while this write was in flight; nothing was written
├── StoreError             the storage engine failed (disk, lock, corruption)
├── EmbedderError          the embedding model could not be loaded or run
├── LLMError               a language-model call failed after its retries
│   ├── LLMTransportError  timeout, connection error, 429 or 5xx after retries
│   └── LLMResponseError   the reply was not valid JSON or had the wrong shape
└── ConfigError            a setting is missing or contradictory
"""

from __future__ import annotations


class MemlaneError(Exception):
    """Base class of every error memlane raises on purpose."""


class ValidationError(MemlaneError, ValueError):
    """Bad input. ``where`` names the field (and file/line when the input came from a file)."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class NotFoundError(MemlaneError, KeyError):
    """An id that does not exist in the caller's namespace."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class StoreNotFoundError(NotFoundError):
    """No store at the path or URL given, and the command only reads (it creates none)."""


class ConflictError(MemlaneError):
    """The request lost a race with another that changed the same thing; retrying may succeed."""


class UserDeletedError(ConflictError):
    """The user was deleted after this write started (an add in flight while ``delete_user`` ran).
    Nothing of the write was stored; a new write starts the user afresh."""


class StoreError(MemlaneError):
    """The storage engine failed. ``reason`` is a short cause that is safe to show to anyone ("disk full",
    "read-only", "locked"): the message itself may name files, hosts and SQL, and is for logs."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        self.reason = reason
        super().__init__(message)


class EmbedderError(MemlaneError):
    """The embedding model could not be loaded or run."""


class LLMError(MemlaneError):
    """A language-model call failed after its retries."""


class LLMTransportError(LLMError):
    """Timeout, connection error, HTTP 429 or 5xx that outlasted the retries, or a refusal of the request.

    ``outage`` says the server could not serve any request now, whatever it asked (unreachable, timing out,
    overloaded, 5xx, or refusing the key or the model: 401, 403, 404), so a job waits for it without using
    up an attempt; False for a refusal of this request (400, 413, 422: another request may pass)."""

    def __init__(self, message: str, *, outage: bool = True) -> None:
        self.outage = outage
        super().__init__(message)


class LLMResponseError(LLMError):
    """The reply was not valid JSON or did not have the expected shape. ``raw`` keeps the reply."""

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        self.raw = raw
        super().__init__(message)


class ConfigError(MemlaneError):
    """A setting is missing or contradictory."""
