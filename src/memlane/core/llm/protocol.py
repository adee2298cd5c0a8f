"""The LLM seam: chat messages, the result of one call, and the narrow protocol every provider meets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, TypeAlias, TypedDict, Unpack

from memlane.core.errors import ValidationError

JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"
"""A value decoded from JSON."""

JSONSchema: TypeAlias = Mapping[str, object]
"""A JSON Schema in the subset :mod:`memlane.core.llm.jsonshape` checks."""

ROLES = frozenset({"system", "user", "assistant"})


class ChatMessage(TypedDict):
    """One chat message as the OpenAI chat API takes it."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What one call used: the model, the token counts (``None`` when the server did not report them; for a
    retried call they add up every attempt), the latency, whether the reply came from the call log without a
    request (``cached``), and the call's row id in the :class:`~memlane.core.llm.calllog.CallLog`, if one is
    kept (``call_id``)."""

    model: str
    tokens_in: int | None
    tokens_out: int | None
    latency_ms: float
    cached: bool
    call_id: int | None

    @staticmethod
    def of(result: CallUsage) -> CallUsage:
        """The usage part of ``result`` (an :class:`LLMResult`), its reply left out."""
        return CallUsage(
            result.model, result.tokens_in, result.tokens_out, result.latency_ms, result.cached, result.call_id
        )

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above."""
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResult(CallUsage):
    """What one ``complete_*`` call returned: its :class:`CallUsage` and the reply, ``text``, and ``parsed``:
    the decoded and shape-checked JSON value for :meth:`LLM.complete_json` and ``None`` for
    :meth:`LLM.complete_text`. The reply's fields are keyword-only."""

    text: str
    parsed: JSONValue


class TextOptions(TypedDict, total=False):
    """The keywords :meth:`LLM.complete_text` and :meth:`LLM.complete_json` take beside the messages, each
    optional: ``temperature`` (default 0.0); ``max_tokens`` (default None: the server's limit); ``purpose``
    labels the call in the log (``extract``, ``answer``, ``judge``; default ""); ``namespace`` is the memory
    user the call is made for, so deleting the user deletes its logged calls; ``block_id`` the memory block it
    is about (an extraction's), so deleting the block deletes them (both default None)."""

    temperature: float
    max_tokens: int | None
    purpose: str
    namespace: str | None
    block_id: str | None


class JsonOptions(TextOptions, total=False):
    """:meth:`LLM.complete_json`'s keywords: those of :class:`TextOptions`, and ``schema``, the JSON Schema the
    value must meet (default None: any JSON value), and ``deadline``, a :func:`time.monotonic` instant by which
    the call ends, its retries, re-asks and waits included (a caller that answers a client within a bound;
    default None: the client's own timeouts and retries)."""

    schema: JSONSchema | None
    deadline: float | None


class LLM(Protocol):
    """A chat model that answers in JSON (extraction) or in free text (answering)."""

    @property
    def name(self) -> str:
        """The provider name it is registered under (``openai``, ``scripted``)."""
        ...

    @property
    def model(self) -> str:
        """The model the requests name; part of every cache key."""
        ...

    def complete_json(self, messages: Sequence[ChatMessage], **options: Unpack[JsonOptions]) -> LLMResult:
        """Ask for one JSON value, checked against ``schema`` when given (the options: :class:`JsonOptions`).
        Raises :class:`~memlane.core.errors.LLMTransportError` or
        :class:`~memlane.core.errors.LLMResponseError` once the retries (or the time) are spent.
        """
        ...

    def complete_text(self, messages: Sequence[ChatMessage], **options: Unpack[TextOptions]) -> LLMResult:
        """Ask for a free-text reply (the options: :class:`TextOptions`)."""
        ...


def check_messages(messages: Sequence[Mapping[str, object]]) -> list[ChatMessage]:
    """Return ``messages`` as plain dicts, or raise ValidationError naming the first bad one."""
    if not messages:
        raise ValidationError("at least one message is needed", where="messages")
    out: list[ChatMessage] = []
    for i, msg in enumerate(messages):
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            raise ValidationError(f"role must be one of {sorted(ROLES)}, got {role!r}", where=f"messages[{i}].role")
        if not isinstance(content, str):
            raise ValidationError("content must be a string", where=f"messages[{i}].content")
        out.append({"role": str(role), "content": content})
    return out
