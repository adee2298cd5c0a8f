"""What memlane's LLMs share: ``complete_json`` and ``complete_text`` written once, their arguments checked and
handed to the LLM's ``_run`` as one :class:`ChatCall`. An LLM built on :class:`ChatLLM` implements ``_run``;
one that wraps another LLM passes the call on with :meth:`ChatCall.ask`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from memlane.core.llm.jsonshape import check_schema
from memlane.core.llm.protocol import LLM, ChatMessage, JsonOptions, JSONSchema, LLMResult, TextOptions, check_messages


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One ``complete_*`` call, its messages checked."""

    messages: list[ChatMessage]
    schema: JSONSchema | None
    want_json: bool
    temperature: float
    max_tokens: int | None
    purpose: str
    namespace: str | None
    block_id: str | None = None
    deadline: float | None = None  # a time.monotonic() instant the whole call ends by

    def params(self) -> dict[str, object]:
        """The request's parameters beside the messages, as the call log keeps them."""
        kind = "json" if self.want_json else "text"
        return {
            "kind": kind,
            "schema": self.schema,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    @classmethod
    def of(
        cls,
        messages: Sequence[ChatMessage],
        options: TextOptions,
        *,
        want_json: bool,
        schema: JSONSchema | None = None,
        deadline: float | None = None,
    ) -> ChatCall:
        """A call of ``messages`` (checked) with ``options``, those not given at their defaults (see
        :class:`~memlane.core.llm.protocol.TextOptions`); TypeError for a keyword the call does not take, as
        Python raises for a named parameter."""
        unknown = sorted(options.keys() - TextOptions.__optional_keys__)
        if unknown:
            kind = "complete_json" if want_json else "complete_text"
            raise TypeError(f"{kind}() got an unexpected keyword argument {unknown[0]!r}")
        if schema is not None:
            check_schema(schema)
        return cls(
            check_messages(messages),
            schema,
            want_json,
            options.get("temperature", 0.0),
            options.get("max_tokens"),
            options.get("purpose", ""),
            options.get("namespace"),
            options.get("block_id"),
            deadline,
        )

    def ask(self, llm: LLM) -> LLMResult:
        """The same call made to ``llm``."""
        options: TextOptions = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "purpose": self.purpose,
            "namespace": self.namespace,
            "block_id": self.block_id,
        }
        if self.want_json:
            return llm.complete_json(self.messages, schema=self.schema, deadline=self.deadline, **options)
        return llm.complete_text(self.messages, **options)


class ChatLLM(ABC):
    """An :class:`~memlane.core.llm.protocol.LLM` whose calls are answered by :meth:`_run`."""

    def complete_json(self, messages: Sequence[ChatMessage], **options: Unpack[JsonOptions]) -> LLMResult:
        """Ask for one JSON value, checked against ``schema`` when given; see :meth:`LLM.complete_json`."""
        schema, deadline = options.pop("schema", None), options.pop("deadline", None)
        return self._run(ChatCall.of(messages, options, want_json=True, schema=schema, deadline=deadline))

    def complete_text(self, messages: Sequence[ChatMessage], **options: Unpack[TextOptions]) -> LLMResult:
        """Ask for a free-text reply; see :meth:`LLM.complete_text`."""
        return self._run(ChatCall.of(messages, options, want_json=False))

    @abstractmethod
    def _run(self, call: ChatCall) -> LLMResult:
        """Answer one checked call."""
