"""The LLM client for OpenAI-compatible chat servers: hosted APIs, vLLM, Ollama, llama.cpp's server.

JSON requests always carry a one-line instruction (with the schema) at the end of the prompt, and ask the
server to constrain the output, in the strongest form it accepts:

1. ``response_format={"type": "json_object", "schema": ...}`` (llama.cpp turns the schema into a grammar),
2. ``response_format={"type": "json_object"}``,
3. no ``response_format``: the prompt alone.

When a server refuses a form (400/422/500 whose body mentions ``response_format`` or JSON), the client
steps down one level, remembers that for its lifetime and resends at once; refusals are not retries.
Whatever comes back is parsed (fences and prose around the JSON are tolerated) and checked against the
schema; a reply that fails is re-asked up to ``max_parse_retries`` times, showing the model its bad reply
and the reason.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from memlane.core.errors import ConfigError, LLMDeadlineError, LLMError, LLMResponseError
from memlane.core.llm.calllog import CallEntry, CallLog, cache_key, prompt_hash, request_json
from memlane.core.llm.chat import ChatCall, ChatLLM
from memlane.core.llm.jsonshape import decode_json, decode_reply, json_instruction
from memlane.core.llm.openai_http import ChatEndpoint, ChatReply, ResponseFormatRejected, Tally
from memlane.core.llm.probe import DEFAULT_PROBE_TIMEOUT_S, LLMProbe
from memlane.core.llm.protocol import ChatMessage, JSONValue, LLMResult
from memlane.core.llm.settings import LLMSettings

JSON_MODES = ("json_object+schema", "json_object", "prompt")
"""The ways of asking for JSON, strongest first (see the module docstring)."""

REPAIR_ECHO_CHARS = 2000
"""How much of a bad reply is shown back to the model when re-asking."""


class OpenAIChatClient(ChatLLM):
    """An :class:`~memlane.core.llm.protocol.LLM` over the OpenAI chat-completions API (sync, thread-safe).

    ``transport`` replaces httpx's network layer (tests use a real in-process server instead, but an
    ``httpx.MockTransport`` works too). ``sleep`` and ``rng`` drive the backoff, so tests need not wait.
    With a ``call_log`` every call is logged and, if ``use_cache``, identical successful calls are served
    from it without a request. ``complete_json`` asks for one JSON value matching the schema (see the module
    docstring for how), by ``deadline`` (a :func:`time.monotonic` instant) when given: every attempt, re-ask
    and wait fits before it.
    """

    name = "openai"

    def __init__(
        self,
        settings: LLMSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        call_log: CallLog | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        use_cache: bool = True,
    ) -> None:
        self.settings = settings
        self.call_log = call_log
        self.use_cache = use_cache
        self._endpoint = ChatEndpoint(settings, transport=transport, sleep=sleep, rng=rng or random.Random())
        self._mode = 0
        self._mode_lock = threading.Lock()

    @property
    def model(self) -> str:
        """The model named in every request."""
        return self.settings.model

    @property
    def json_mode(self) -> str:
        """The strongest JSON request form this server has not refused (one of :data:`JSON_MODES`)."""
        return JSON_MODES[self._mode]

    def probe(self, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> LLMProbe:
        """Whether the server answers ``GET {base}/models`` within ``timeout_s`` (one request, no retry, no
        completion); see :mod:`memlane.core.llm.probe`."""
        return self._endpoint.probe(self.model, timeout_s)

    def close(self) -> None:
        """Close the HTTP connection pool (the call log belongs to the caller)."""
        self._endpoint.close()

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _run(self, call: ChatCall) -> LLMResult:
        started = time.perf_counter()
        request = request_json(self.name, self.model, call.messages, call.params())
        key = cache_key(request)
        hit = self._from_cache(call, key)
        if hit is not None:
            return self._log(call, request, key, hit, started)
        tally = Tally()
        try:
            text, parsed = self._ask(call, tally)
        except LLMError as exc:
            raw = exc.raw if isinstance(exc, LLMResponseError) else None
            self._log(
                call,
                request,
                key,
                _Outcome("", None, tally, False, f"{type(exc).__name__}: {exc}", raw),
                started,
            )
            raise
        return self._log(call, request, key, _Outcome(text, parsed, tally, cached=False), started)

    def _from_cache(self, call: ChatCall, key: str) -> _Outcome | None:
        if self.call_log is None or not self.use_cache:
            return None
        record = self.call_log.lookup(key)
        if record is None or record.response is None:
            return None
        try:
            parsed = decode_reply(record.response, call.schema) if call.want_json else None
        except LLMResponseError:
            return None  # written by an older, laxer checker: ask again rather than serve it
        tally = Tally(attempts=0, tokens_in=record.tokens_in, tokens_out=record.tokens_out)
        return _Outcome(record.response, parsed, tally, cached=True)

    def _ask(self, call: ChatCall, tally: Tally) -> tuple[str, JSONValue]:
        instruction = json_instruction(call.schema)
        base = _with_instruction(call.messages, instruction) if call.want_json else call.messages
        messages = base
        last: LLMResponseError | None = None
        tries = self.settings.max_parse_retries + 1
        done = 0
        while done < tries:
            if done and call.deadline is not None and time.monotonic() >= call.deadline:
                break
            reply: ChatReply | None = None
            try:
                reply = self._send(call, messages, tally)
                if not call.want_json:
                    return reply.text, None
                value, ignored = decode_json(reply.text, call.schema)
                tally.ignored_keys = len(ignored)
                return reply.text, value
            except LLMDeadlineError:
                if last is None:
                    raise
                break  # the replies so far were unusable, and there is no time for another: that is what failed
            except LLMResponseError as exc:
                last = exc
                if reply is not None:
                    messages = [
                        *base,
                        {"role": "assistant", "content": reply.text[:REPAIR_ECHO_CHARS]},
                        {"role": "user", "content": f"That reply was not usable: {exc}. {instruction}"},
                    ]
            done += 1
        assert last is not None
        within = f"after {tries} tries" if done == tries else f"in {done} tries before the deadline"
        raise LLMResponseError(f"no usable reply {within}: {last}", raw=last.raw)

    def _send(self, call: ChatCall, messages: list[ChatMessage], tally: Tally) -> ChatReply:
        while True:
            mode = self._mode
            body: dict[str, object] = {
                "model": self.model,
                "messages": messages,
                "temperature": call.temperature,
            }
            if call.max_tokens is not None:
                body["max_tokens"] = call.max_tokens
            if call.want_json and JSON_MODES[mode] != "prompt":
                response_format: dict[str, object] = {"type": "json_object"}
                if call.schema is not None and JSON_MODES[mode] == "json_object+schema":
                    response_format["schema"] = dict(call.schema)
                body["response_format"] = response_format
            try:
                return self._endpoint.send(body, tally, call.deadline)
            except ResponseFormatRejected:
                self._step_down(mode, call.schema is not None)

    def _step_down(self, refused: int, had_schema: bool) -> None:
        # A refused plain json_object (no schema in it) means the server has no JSON mode at all.
        target = refused + 1 if had_schema and refused == 0 else len(JSON_MODES) - 1
        with self._mode_lock:
            self._mode = max(self._mode, target)

    def _log(self, call: ChatCall, request: str, key: str, outcome: _Outcome, started: float) -> LLMResult:
        latency_ms = (time.perf_counter() - started) * 1000.0
        call_id = None
        if self.call_log is not None:
            entry = CallEntry(
                model=self.model,
                purpose=call.purpose,
                namespace=call.namespace,
                prompt_hash=prompt_hash(call.messages),
                cache_key=key,
                request=request,
                response=outcome.raw if outcome.error else outcome.text,
                tokens_in=outcome.tally.tokens_in,
                tokens_out=outcome.tally.tokens_out,
                latency_ms=latency_ms,
                error=outcome.error,
                attempts=outcome.tally.attempts,
                cached=outcome.cached,
                ignored_keys=outcome.tally.ignored_keys,
                block_id=call.block_id,
            )
            call_id = self.call_log.record(entry)
        return LLMResult(
            text=outcome.text,
            parsed=outcome.parsed,
            model=self.model,
            tokens_in=outcome.tally.tokens_in,
            tokens_out=outcome.tally.tokens_out,
            latency_ms=latency_ms,
            cached=outcome.cached,
            call_id=call_id,
        )


@dataclass(frozen=True, slots=True)
class _Outcome:
    text: str
    parsed: JSONValue
    tally: Tally
    cached: bool
    error: str | None = None
    raw: str | None = None  # the last reply of a failed call, for the log


def _with_instruction(messages: list[ChatMessage], instruction: str) -> list[ChatMessage]:
    """Append the JSON instruction to the last user message, or add one (keeps role alternation intact)."""
    if messages[-1]["role"] == "user":
        last = messages[-1]
        return [*messages[:-1], {"role": "user", "content": f"{last['content']}\n\n{instruction}"}]
    return [*messages, {"role": "user", "content": instruction}]


def make_openai_client(
    *,
    settings: LLMSettings | None = None,
    call_log: CallLog | None = None,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    use_cache: bool = True,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> OpenAIChatClient:
    """Registry factory: ``settings`` (with ``overrides`` applied) or else settings from the environment."""
    if settings is None:
        if environ is None:
            raise ConfigError(
                "the openai LLM needs its settings: settings=LLMSettings(...) (memlane.settings.load().llm_settings() "
                "reads MEMLANE_LLM_*) or environ="
            )
        settings = LLMSettings.from_env(environ, **overrides)
    elif overrides:
        settings = dataclasses.replace(settings, **overrides)
    return OpenAIChatClient(settings, transport=transport, call_log=call_log, sleep=sleep, rng=rng, use_cache=use_cache)


def register() -> None:
    """Register this client as the ``openai`` provider."""
    from memlane.core.llm.registry import register_llm

    register_llm("openai", make_openai_client)
