"""The answering and judging LLMs of a QA run, by provider name (``openai`` or ``scripted``).

The judge may be a different model or server: ``MEMLANE_JUDGE_BASE_URL``, ``MEMLANE_JUDGE_API_KEY`` and
``MEMLANE_JUDGE_MODEL`` override, one by one, the ``MEMLANE_LLM_*`` settings the answering model uses
(an empty value counts as unset). The caller passes the :class:`~memlane.settings.Settings` it built once,
at the edge. Both LLMs share one call log, which is also the response cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memlane.core.llm import LLM, CallLog, LLMSettings, make_llm
from memlane.settings import Settings

SCRIPTED_JUDGE_MODEL = "scripted-judge"


@dataclass(frozen=True)
class LLMOverrides:
    """Command-line overrides of the environment (``None``: take the environment's)."""

    model: str | None = None
    base_url: str | None = None


def _overrides(overrides: LLMOverrides | None, concurrency: int | None) -> dict[str, Any]:
    given = overrides or LLMOverrides()
    values: dict[str, Any] = {"model": given.model or None, "base_url": given.base_url or None}
    if concurrency is not None:
        values["max_concurrency"] = concurrency
    return values


def answer_settings(
    settings: Settings, overrides: LLMOverrides | None = None, concurrency: int | None = None
) -> LLMSettings:
    """``MEMLANE_LLM_*`` with the overrides applied."""
    return settings.llm_settings(**_overrides(overrides, concurrency))


def judge_settings(
    settings: Settings, overrides: LLMOverrides | None = None, concurrency: int | None = None
) -> LLMSettings:
    """The judge's settings: the overrides, else ``MEMLANE_JUDGE_*``, else ``MEMLANE_LLM_*``."""
    return settings.judge_settings(**_overrides(overrides, concurrency))


def build_llm(
    provider: str,
    *,
    role: str,
    call_log: CallLog | None,
    settings: Settings,
    overrides: LLMOverrides | None = None,
    concurrency: int | None = None,
) -> LLM:
    """The ``answer`` or ``judge`` LLM. ``scripted`` is the offline fake (no settings read)."""
    if provider == "scripted":
        return make_llm("scripted", call_log=call_log, model="scripted" if role == "answer" else SCRIPTED_JUDGE_MODEL)
    if provider == "openai":
        make = judge_settings if role == "judge" else answer_settings
        return make_llm("openai", settings=make(settings, overrides, concurrency), call_log=call_log)
    # A third-party provider registered under its own name takes its own settings.
    return make_llm(provider, call_log=call_log)
