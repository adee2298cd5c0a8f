"""Settings of the OpenAI-compatible client, built once at the edge (``memlane.settings``) and passed in.
The core reads no environment variable; the names below are what error messages point the user to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from memlane.core.errors import ConfigError

ENV_API_KEY = "MEMLANE_LLM_API_KEY"
ENV_MODEL = "MEMLANE_LLM_MODEL"
ENV_BASE_URL = "MEMLANE_LLM_BASE_URL"
ENV_TIMEOUT = "MEMLANE_LLM_TIMEOUT"
ENV_MAX_CONCURRENCY = "MEMLANE_LLM_MAX_CONCURRENCY"
ENV_MAX_RETRIES = "MEMLANE_LLM_MAX_RETRIES"

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_CONCURRENCY = 4
DEFAULT_MAX_RETRIES = 4
DEFAULT_MAX_PARSE_RETRIES = 2
DEFAULT_BACKOFF_BASE_S = 0.5
DEFAULT_BACKOFF_CAP_S = 30.0
DEFAULT_RETRY_AFTER_CAP_S = 60.0


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """How to reach an OpenAI-compatible chat server.

    ``api_key`` is required and has no default; a local server (llama.cpp, vLLM, Ollama) accepts any
    non-empty key. It is left out of ``repr`` so it never lands in a log. ``max_retries`` counts transport
    retries (429, 5xx, timeouts, connection errors); ``max_parse_retries`` counts re-asks after a reply that
    is not valid JSON of the right shape. Backoff is exponential with full jitter, capped at
    ``backoff_cap_s``; a ``Retry-After`` header replaces it, capped at ``retry_after_cap_s``.
    """

    model: str
    api_key: str = field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_retries: int = DEFAULT_MAX_RETRIES
    max_parse_retries: int = DEFAULT_MAX_PARSE_RETRIES
    backoff_base_s: float = DEFAULT_BACKOFF_BASE_S
    backoff_cap_s: float = DEFAULT_BACKOFF_CAP_S
    retry_after_cap_s: float = DEFAULT_RETRY_AFTER_CAP_S

    def __post_init__(self) -> None:
        if not self.api_key:
            raise ConfigError(f"no API key for the LLM: set {ENV_API_KEY} (a local server accepts any non-empty value)")
        if not self.model:
            raise ConfigError(f"no LLM model: set {ENV_MODEL} (for llama.cpp, the --model_alias)")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"LLM base URL must start with http:// or https://, got {self.base_url!r}")
        if self.timeout_s <= 0:
            raise ConfigError(f"LLM timeout must be positive, got {self.timeout_s}")
        if self.max_concurrency < 1:
            raise ConfigError(f"LLM max_concurrency must be at least 1, got {self.max_concurrency}")
        if self.max_retries < 0 or self.max_parse_retries < 0:
            raise ConfigError("LLM retry counts must not be negative")
        if self.backoff_base_s < 0 or self.backoff_cap_s < 0 or self.retry_after_cap_s < 0:
            raise ConfigError("LLM backoff times must not be negative")

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> LLMSettings:
        """Read ``MEMLANE_LLM_*`` from the mapping ``environ`` (the process environment is read at the edge:
        ``memlane.settings.load().llm_settings()``).

        Keyword ``overrides`` (any field name) win over the environment. A missing key or model raises
        :class:`~memlane.core.errors.ConfigError`.
        """
        env = environ
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(f"unknown LLM settings: {', '.join(unknown)}")
        values: dict[str, Any] = {
            "api_key": env.get(ENV_API_KEY, ""),
            "model": env.get(ENV_MODEL, ""),
            "base_url": env.get(ENV_BASE_URL) or DEFAULT_BASE_URL,
        }
        for name, var, kind in (
            ("timeout_s", ENV_TIMEOUT, float),
            ("max_concurrency", ENV_MAX_CONCURRENCY, int),
            ("max_retries", ENV_MAX_RETRIES, int),
        ):
            raw = env.get(var)
            if raw:
                try:
                    values[name] = kind(raw)
                except ValueError:
                    raise ConfigError(f"{var} must be a number, got {raw!r}") from None
        values.update(overrides)
        return cls(**values)
