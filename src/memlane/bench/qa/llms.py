"""The answering and judging LLMs of a QA run, by provider name (``openai`` or ``scripted``).

The judge may be a different model or server: ``MEMLANE_JUDGE_BASE_URL``, ``MEMLANE_JUDGE_API_KEY`` and
``MEMLANE_JUDGE_MODEL`` override, one by one, the ``MEMLANE_LLM_*`` settings the answering model uses
(an empty value counts as unset). Settings are read from the ``environ`` mapping the caller passes, once,
at the edge. Both LLMs share one call log, which is also the response cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memlane.core.llm import LLM, CallLog, LLMSettings, make_llm
from memlane.core.llm.settings import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL

ENV_JUDGE_BASE_URL = "MEMLANE_JUDGE_BASE_URL"
ENV_JUDGE_API_KEY = "MEMLANE_JUDGE_API_KEY"
ENV_JUDGE_MODEL = "MEMLANE_JUDGE_MODEL"
SCRIPTED_JUDGE_MODEL = "scripted-judge"


@dataclass(frozen=True)
class LLMOverrides:
    """Command-line overrides of the environment (``None``: take the environment's)."""

    model: str | None = None
    base_url: str | None = None


def _settings(environ: Mapping[str, str], values: Mapping[str, str | None], concurrency: int | None) -> LLMSettings:
    overrides: dict[str, Any] = {k: v for k, v in values.items() if v}
    if concurrency is not None:
        overrides["max_concurrency"] = concurrency
    return LLMSettings.from_env(environ, **overrides)


def answer_settings(
    environ: Mapping[str, str], overrides: LLMOverrides | None = None, concurrency: int | None = None
) -> LLMSettings:
    """``MEMLANE_LLM_*`` with the overrides applied."""
    overrides = overrides or LLMOverrides()
    return _settings(environ, {"model": overrides.model, "base_url": overrides.base_url}, concurrency)


def judge_settings(
    environ: Mapping[str, str], overrides: LLMOverrides | None = None, concurrency: int | None = None
) -> LLMSettings:
    """The judge's settings: the overrides, else ``MEMLANE_JUDGE_*``, else ``MEMLANE_LLM_*``."""
    overrides = overrides or LLMOverrides()
    values = {
        "model": overrides.model or environ.get(ENV_JUDGE_MODEL) or environ.get(ENV_MODEL),
        "base_url": overrides.base_url or environ.get(ENV_JUDGE_BASE_URL) or environ.get(ENV_BASE_URL),
        "api_key": environ.get(ENV_JUDGE_API_KEY) or environ.get(ENV_API_KEY),
    }
    return _settings(environ, values, concurrency)


def build_llm(
    provider: str,
    *,
    role: str,
    call_log: CallLog | None,
    environ: Mapping[str, str],
    overrides: LLMOverrides | None = None,
    concurrency: int | None = None,
) -> LLM:
    """The ``answer`` or ``judge`` LLM. ``scripted`` is the offline fake (no settings read)."""
    if provider == "scripted":
        return make_llm("scripted", call_log=call_log, model="scripted" if role == "answer" else SCRIPTED_JUDGE_MODEL)
    if provider == "openai":
        make = judge_settings if role == "judge" else answer_settings
        return make_llm("openai", settings=make(environ, overrides, concurrency), call_log=call_log)
    # A third-party provider registered under its own name takes its own settings.
    return make_llm(provider, call_log=call_log)
