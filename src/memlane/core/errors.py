"""The one exception tree of memlane.

Foreign exceptions (sqlite3, httpx, onnxruntime, json) are translated into these at the boundary where
they enter, and nowhere else.

MemlaneError
├── ValidationError        bad input: says what is wrong and where (field, file, line)
├── NotFoundError          an id that does not exist in the caller's namespace
│   └── StoreNotFoundError a store path or URL where no store exists (and none was to be created)
├── ConflictError          the request lost a race with another that changed the same thing
│   ├── UserDeletedError   the user was deleted while this write was in flight; nothing was written
│   ├── AlreadyExistsError creating a user, session or prompt whose id is taken
│   ├── SessionEndedError  a write or update into an ended session; ending a session twice
│   └── PromptArchivedError using or updating an archived prompt
├── QueueFullError         an add would queue more extraction jobs than its limit allows; nothing was written
├── StoreError             the storage engine failed (disk, lock, corruption)
├── EmbedderError          the embedding model could not be loaded or run
├── LLMError               a language-model call failed after its retries
│   ├── LLMTransportError  timeout, connection error, 429 or 5xx after retries
│   │   └── LLMDeadlineError the caller's deadline came before a reply
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


class AlreadyExistsError(ConflictError):
    """Creating something whose id is taken: ``what`` (``user``, ``session``, ``prompt``) and its ``name``."""

    code = "ALREADY_EXISTS"

    def __init__(self, what: str, name: str, message: str | None = None) -> None:
        self.what = what
        self.name = name
        super().__init__(message or f"{what} {name!r} already exists")


class SessionEndedError(ConflictError):
    """A write or an update into an ended session, or ending a session that has ended. Its blocks stay
    readable and searchable."""

    code = "SESSION_ALREADY_ENDED"

    def __init__(self, user: str, session_id: str, message: str | None = None) -> None:
        self.user = user
        self.session_id = session_id
        super().__init__(message or f"session {session_id!r} has ended")


class PromptArchivedError(ConflictError):
    """Using or updating an archived prompt (its id stays reserved until it is purged)."""

    code = "PROMPT_ARCHIVED"

    def __init__(self, prompt_id: str, version: int | None = None) -> None:
        self.prompt_id = prompt_id
        self.version = version
        at = "" if version is None else f" version {version}"
        super().__init__(f"prompt {prompt_id!r}{at} is archived")


class QueueFullError(MemlaneError):
    """An add that would queue more extraction jobs than its ``max_queued`` allows; nothing was written."""

    def __init__(self, queued: int, limit: int) -> None:
        super().__init__(f"the extraction queue is full ({queued} of {limit} blocks waiting); retry later")
        self.queued = queued
        self.limit = limit


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
    rate-limiting or overloaded: 429, 502, 503, 504, or refusing the key or the model: 401, 403, 404), so a
    job waits for it without using up an attempt; False when the server failed or refused this request
    (500 and the other 5xx; 400, 413, 422: another request may pass). ``could_be_the_request``: an outage
    as far as this request can tell, but one the server gave this request after receiving it (429, 408,
    502-504, no reply in time, the connection dropped): if other requests pass meanwhile, it is this
    request's (docs/design/002-extraction-queue.md, "Whose failure")."""

    def __init__(self, message: str, *, outage: bool = True, could_be_the_request: bool = False) -> None:
        self.outage = outage
        self.could_be_the_request = could_be_the_request
        super().__init__(message)


class LLMDeadlineError(LLMTransportError):
    """The caller's deadline (a synchronous extraction's bound) came before a reply: the server was slow or
    unreachable for that long, which says nothing of the request."""


class LLMResponseError(LLMError):
    """The reply was not valid JSON or did not have the expected shape. ``raw`` keeps the reply."""

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        self.raw = raw
        super().__init__(message)


class ConfigError(MemlaneError):
    """A setting is missing or contradictory."""
