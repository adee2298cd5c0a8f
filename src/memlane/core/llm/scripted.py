"""A deterministic LLM with no network, so the whole pipeline runs offline and tests can script replies.

Replies come from, in order of preference: a list of texts (one per answered call, in order), a function
of the messages, or the built-in behaviour:

* **JSON**: a value built from the schema out of the sentences of the last user message. A string is the
  first sentence, an array holds one item per sentence (at most ``MAX_ITEMS``), an object fills every
  property. So ``{"summary": string, "facts": [string]}`` gets the first sentence as the summary and the
  sentences as facts. Without a schema that is also the shape returned.
* **Text**: the line of the conversation that shares the most words with the question (the last line of
  the last user message that ends in ``?``, else its last line); ``"I don't know."`` when none shares one.

``fail_on`` maps call numbers (1-based, every ``complete_*`` call counts) to a failure: ``"transport"``
raises LLMTransportError, ``"invalid_json"`` replies with broken JSON (so a JSON call raises
LLMResponseError). A failed call consumes no scripted reply. Token counts are word counts; latency is 0.
Calls are logged (model ``scripted``) when a ``call_log`` is given, but never served from it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from memlane.core.errors import LLMError, LLMResponseError, LLMTransportError
from memlane.core.llm.calllog import CallEntry, CallLog, cache_key, prompt_hash, request_json
from memlane.core.llm.chat import ChatCall, ChatLLM
from memlane.core.llm.jsonshape import decode_json
from memlane.core.llm.probe import DEFAULT_PROBE_TIMEOUT_S, LLMProbe
from memlane.core.llm.protocol import ChatMessage, JSONSchema, JSONValue, LLMResult
from memlane.core.llm.settings import LLMSettings

ScriptedFailure = Literal["transport", "invalid_json"]
Script = Sequence[str] | Callable[[Sequence[ChatMessage]], str]

INVALID_JSON = '{"summary": "unterminated'
MAX_ITEMS = 20
UNKNOWN_ANSWER = "I don't know."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")
# fmt: off
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "his", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "she", "that", "the", "their", "they", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "with", "you", "your",
})
# fmt: on


class ScriptedLLM(ChatLLM):
    """An :class:`~memlane.core.llm.protocol.LLM` that answers from a script (see the module docstring):
    ``complete_json`` with the scripted or derived JSON value, checked against the schema (at once: within
    any ``deadline``), ``complete_text`` with the scripted text or the best-matching line of the
    conversation."""

    name = "scripted"

    def __init__(
        self,
        script: Script | None = None,
        *,
        call_log: CallLog | None = None,
        fail_on: Mapping[int, ScriptedFailure] | None = None,
        model: str = "scripted",
    ) -> None:
        self.call_log = call_log
        self.calls = 0
        # A bare string is one reply, not a sequence of one-character replies.
        self._replies = (script,) if isinstance(script, str) else None if callable(script) else script
        self._responder = script if callable(script) else None
        self._answered = 0
        self._fail_on = dict(fail_on or {})
        self._model = model
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The model name logged with each call."""
        return self._model

    def probe(self, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> LLMProbe:
        """Always there: the script runs in this process."""
        return LLMProbe(True, None, 0.0, detail="scripted: answers in process")

    def _run(self, call: ChatCall) -> LLMResult:
        messages, schema, want_json = call.messages, call.schema, call.want_json
        with self._lock:
            self.calls += 1
            number = self.calls
            failure = self._fail_on.get(number)
            text = "" if failure else self._next_reply(messages, schema, want_json)
        request = request_json(self.name, self.model, messages, call.params())
        tokens_in = sum(len(_WORD.findall(m["content"])) for m in messages)
        error: LLMError | None = None
        parsed: JSONValue = None
        ignored: list[str] = []
        if failure == "transport":
            error = LLMTransportError(f"scripted transport failure on call {number}")
        else:
            text = INVALID_JSON if failure == "invalid_json" else text
            try:
                parsed, ignored = decode_json(text, schema) if want_json else (None, [])
            except LLMResponseError as exc:
                error = exc
        entry = CallEntry(
            model=self.model,
            purpose=call.purpose,
            namespace=call.namespace,
            prompt_hash=prompt_hash(messages),
            cache_key=cache_key(request),
            request=request,
            response=None if failure == "transport" else text,
            tokens_in=tokens_in,
            tokens_out=len(_WORD.findall(text)),
            latency_ms=0.0,
            error=None if error is None else f"{type(error).__name__}: {error}",
            attempts=1,
            cached=False,
            ignored_keys=len(ignored),
            block_id=call.block_id,
        )
        call_id = self.call_log.record(entry) if self.call_log is not None else None
        if error is not None:
            raise error
        return LLMResult(self.model, entry.tokens_in, entry.tokens_out, 0.0, False, call_id, text=text, parsed=parsed)

    def _next_reply(self, messages: list[ChatMessage], schema: JSONSchema | None, want_json: bool) -> str:
        if self._responder is not None:
            return self._responder(messages)
        if self._replies is not None:
            if self._answered >= len(self._replies):
                raise LLMError(f"the script has {len(self._replies)} replies and all were used")
            self._answered += 1
            return self._replies[self._answered - 1]
        if want_json:
            return json.dumps(derive_json(messages, schema), ensure_ascii=False)
        return derive_answer(messages)


def sentences(text: str) -> list[str]:
    """Split text into sentences at ``.``, ``!`` or ``?`` followed by white space."""
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip()]


def derive_json(messages: Sequence[ChatMessage], schema: JSONSchema | None) -> JSONValue:
    """The built-in JSON reply: a value shaped by ``schema`` from the last user message's sentences."""
    user = [m["content"] for m in messages if m["role"] == "user"]
    parts = sentences(user[-1] if user else messages[-1]["content"])[:MAX_ITEMS]
    if schema is None or "properties" not in schema:
        return {"summary": parts[0] if parts else "", "facts": list(parts)}
    return _fill(schema, parts)


def _fill(schema: Mapping[str, object], parts: list[str]) -> JSONValue:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        value: JSONValue = enum[0]
        return value
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties")
        items = props.items() if isinstance(props, Mapping) else []
        return {name: _fill(sub, parts) for name, sub in items if isinstance(sub, Mapping)}
    if kind == "array":
        sub = schema.get("items")
        sub = sub if isinstance(sub, Mapping) else {"type": "string"}
        return [_fill(sub, [p]) for p in parts]
    fixed: dict[object, JSONValue] = {
        "string": parts[0] if parts else "",
        "integer": 0,
        "number": 0,
        "boolean": False,
    }
    return fixed.get(kind)


def derive_answer(messages: Sequence[ChatMessage]) -> str:
    """The built-in text reply: the context line sharing the most words with the question."""
    user = [m["content"] for m in messages if m["role"] == "user"] or [messages[-1]["content"]]
    last_lines = [ln.strip() for ln in user[-1].splitlines() if ln.strip()]
    if not last_lines:
        return UNKNOWN_ANSWER
    question = next((ln for ln in reversed(last_lines) if ln.endswith("?")), last_lines[-1])
    wanted = _content_words(question)
    best, best_score = UNKNOWN_ANSWER, 0
    for message in messages:
        for line in message["content"].splitlines():
            line = line.strip()
            score = len(wanted & _content_words(line)) if line and line != question else 0
            if score > best_score:
                best, best_score = line, score
    return best


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def make_scripted(
    *,
    settings: LLMSettings | None = None,
    call_log: CallLog | None = None,
    script: Script | None = None,
    fail_on: Mapping[int, ScriptedFailure] | None = None,
    model: str = "scripted",
    **unused: Any,
) -> ScriptedLLM:
    """Registry factory; ``settings`` and any other option are ignored, so the fake stands in anywhere."""
    return ScriptedLLM(script, call_log=call_log, fail_on=fail_on, model=model)


def register() -> None:
    """Register the fake as the ``scripted`` provider."""
    from memlane.core.llm.registry import register_llm

    register_llm("scripted", make_scripted)
