"""What memlane's LLMs share: ``complete_json`` and ``complete_text`` written once, their arguments checked and
handed to the LLM's ``_run`` as one :class:`ChatCall`. An LLM built on :class:`ChatLLM` implements ``_run``;
one that wraps another LLM passes the call on with :meth:`ChatCall.ask`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from memlane.core.llm.jsonshape import check_schema
from memlane.core.llm.protocol import LLM, ChatMessage, JSONSchema, LLMResult, check_messages


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

    def ask(self, llm: LLM) -> LLMResult:
        """The same call made to ``llm``."""
        options = _Options(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            purpose=self.purpose,
            namespace=self.namespace,
            block_id=self.block_id,
        )
        if self.want_json:
            return llm.complete_json(self.messages, schema=self.schema, deadline=self.deadline, **options)
        return llm.complete_text(self.messages, **options)


class _Options(TypedDict):
    """The arguments complete_json and complete_text both take, beside the messages."""

    temperature: float
    max_tokens: int | None
    purpose: str
    namespace: str | None
    block_id: str | None


class ChatLLM(ABC):
    """An :class:`~memlane.core.llm.protocol.LLM` whose calls are answered by :meth:`_run`."""

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: JSONSchema | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str = "",
        namespace: str | None = None,
        block_id: str | None = None,
        deadline: float | None = None,
    ) -> LLMResult:
        """Ask for one JSON value, checked against ``schema`` when given; see :meth:`LLM.complete_json`."""
        if schema is not None:
            check_schema(schema)
        call = ChatCall(
            check_messages(messages), schema, True, temperature, max_tokens, purpose, namespace, block_id, deadline
        )
        return self._run(call)

    def complete_text(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str = "",
        namespace: str | None = None,
        block_id: str | None = None,
    ) -> LLMResult:
        """Ask for a free-text reply; see :meth:`LLM.complete_text`."""
        call = ChatCall(check_messages(messages), None, False, temperature, max_tokens, purpose, namespace, block_id)
        return self._run(call)

    @abstractmethod
    def _run(self, call: ChatCall) -> LLMResult:
        """Answer one checked call."""
