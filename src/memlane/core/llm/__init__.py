"""The LLM seam: one protocol, an OpenAI-compatible client, a scripted fake, a call log that is the cache.

Quickstart::

    settings = memlane.settings.load().llm_settings()   # MEMLANE_LLM_API_KEY, _MODEL, _BASE_URL, read at the edge
    llm = make_llm("openai", settings=settings, call_log=CallLog(Path("calls.sqlite")))
    result = llm.complete_json(messages, schema=FACTS_SCHEMA, purpose="extract", namespace="alice")
    result.parsed                              # checked against the schema

Offline, ``make_llm("scripted")`` answers deterministically with no network.
"""

from memlane.core.llm.calllog import CallEntry, CallLog, CallRecord, CallStats
from memlane.core.llm.openai_client import OpenAIChatClient
from memlane.core.llm.protocol import (
    LLM,
    CallUsage,
    ChatMessage,
    JsonOptions,
    JSONSchema,
    JSONValue,
    LLMResult,
    TextOptions,
)
from memlane.core.llm.registry import LLMFactory, llm_names, make_llm, register_llm
from memlane.core.llm.scripted import ScriptedFailure, ScriptedLLM
from memlane.core.llm.settings import LLMSettings

__all__ = [
    "LLM",
    "CallEntry",
    "CallLog",
    "CallRecord",
    "CallStats",
    "CallUsage",
    "ChatMessage",
    "JSONSchema",
    "JSONValue",
    "JsonOptions",
    "LLMFactory",
    "LLMResult",
    "LLMSettings",
    "OpenAIChatClient",
    "ScriptedFailure",
    "ScriptedLLM",
    "TextOptions",
    "llm_names",
    "make_llm",
    "register_llm",
]
