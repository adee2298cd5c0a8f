"""memlane's settings: every ``MEMLANE_*`` environment variable, read in one place, once per entry point.

:class:`Settings` knows each variable, its type and its default. An entry point (the CLI, ``memlane serve``,
``memlane mcp``, a bench command, a Python program) builds it once with :func:`load` and passes what it
holds down: the core never reads the environment, it takes arguments (``Memory.open(..., llm=...,
cache_dir=...)``, :class:`~memlane.core.llm.settings.LLMSettings`). A CLI option wins over its variable;
``memlane config show`` prints the effective values and where each came from, secrets masked.

>>> from memlane.settings import load
>>> settings = load()                                       # doctest: +SKIP
>>> mem = Memory.open(settings.store, **settings.memory_options())  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr
from pydantic import ValidationError as PydanticValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memlane.core.embedding.protocol import EmbedderConfig
from memlane.core.errors import ConfigError
from memlane.core.jobs import DEFAULT_MAX_ATTEMPTS
from memlane.core.llm.settings import DEFAULT_BASE_URL, LLMSettings
from memlane.core.store.candidates.annsettings import AnnSettings

ENV_PREFIX = "MEMLANE_"
DEFAULT_STORE = "memlane.db"
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_BODY_BYTES = 1024**3  # the largest --max-body
DEFAULT_READ_TIMEOUT_S = 30.0
DEFAULT_HEALTH_CHECK_EVERY_S = 3600.0
# An Agent Memory add with async_processing false answers within this many seconds: its SDK gives up on a
# reply after 30 s, and a third of that is left for the embedding, the write and the network.
DEFAULT_AGENT_SYNC_TIMEOUT_S = 20.0
MASK = "********"


class Settings(BaseSettings):
    """Every setting memlane reads from the environment: field ``x`` is ``MEMLANE_X``.

    ``None`` means "not set": the command (or the core) uses its own default, as ``memlane config show``
    says. Secrets are :class:`~pydantic.SecretStr` and never printed.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True)

    # -- the store and its embedder -----------------------------------------------------------------------
    store: str = Field(default=DEFAULT_STORE, description="SQLite file of the store, or a postgresql:// URL (--store)")
    embedder: str = Field(default="minilm", description="Embedder by name: minilm, hashing, openai (--embedder)")
    cache_dir: Path | None = Field(
        default=None, description="Where the built MiniLM model (and the bench cache) is kept"
    )
    embed_base_url: str | None = Field(default=None, description="The 'openai' embedder's server")
    embed_api_key: SecretStr | None = Field(default=None, description="The 'openai' embedder's API key")
    embed_model: str | None = Field(default=None, description="The 'openai' embedder's model")
    embed_dim: int | None = Field(default=None, description="The 'openai' embedder's vector size")
    # -- the LLM (extraction, answering) -----------------------------------------------------------------
    llm: str = Field(default="openai", description="LLM provider: openai or scripted (--llm)")
    llm_model: str | None = Field(default=None, description="The LLM's model (--llm-model)")
    llm_base_url: str | None = Field(
        default=None, description=f"The LLM server (--llm-base-url); default {DEFAULT_BASE_URL}"
    )
    llm_api_key: SecretStr | None = Field(default=None, description="The LLM's API key (any value for a local server)")
    llm_timeout: float | None = Field(default=None, description="Seconds an LLM call may take")
    llm_max_concurrency: int | None = Field(default=None, description="LLM calls in flight at once")
    llm_max_retries: int | None = Field(default=None, description="Retries of a failed LLM call")
    llm_log: Path | None = Field(default=None, description="SQLite file of the LLM call log and cache (--llm-log)")
    # -- the QA judge ------------------------------------------------------------------------------------
    judge: str = Field(default="openai", description="Judge provider of `bench qa` (--judge)")
    judge_model: str | None = Field(default=None, description="The judge's model; default MEMLANE_LLM_MODEL")
    judge_base_url: str | None = Field(default=None, description="The judge's server; default MEMLANE_LLM_BASE_URL")
    judge_api_key: SecretStr | None = Field(
        default=None, description="The judge's API key; default MEMLANE_LLM_API_KEY"
    )
    # -- memlane add / worker ----------------------------------------------------------------------------
    conversation: str = Field(default="default", description="Conversation id of `memlane add` (--conversation)")
    session: str = Field(default="default", description="Session id of `memlane add` (--session)")
    perspective: str = Field(default="dual", description="Perspective mode of `memlane add` (--perspective)")
    extract: str = Field(default="off", description="Extraction of `memlane add`: off, async, sync (--extract)")
    worker_concurrency: int = Field(default=4, description="Jobs a `memlane worker` runs at once (--concurrency)")
    worker_lease: float = Field(default=120.0, description="Seconds a worker holds a job (--lease)")
    retention_every: float = Field(
        default=3600.0,
        description="Seconds between the retention sweeps of `memlane worker` and `memlane serve`; 0: none "
        "(--retention-every)",
    )
    extraction_attempts: int = Field(
        default=DEFAULT_MAX_ATTEMPTS,
        ge=1,
        description="Failed attempts before a block's extraction fails for good (extraction_failed, re-queueable); "
        "an LLM outage uses none",
    )
    default_ttl: int = Field(
        default=0,
        description="Seconds a block lives after it is written when neither its add nor its session gives a TTL; "
        "0: never",
    )
    # -- memlane serve -----------------------------------------------------------------------------------
    admin_key: SecretStr | None = Field(default=None, description="Admin key of the HTTP service (never an option)")
    host: str = Field(default="127.0.0.1", description="Address `memlane serve` listens on (--host)")
    port: int = Field(default=8420, description="Port of `memlane serve` (--port)")
    workers: int = Field(default=1, description="Extraction jobs `memlane serve` runs at once (--workers)")
    http_max_body: int = Field(default=DEFAULT_MAX_BODY_BYTES, description="Largest request body, bytes (--max-body)")
    http_read_timeout: float = Field(
        default=DEFAULT_READ_TIMEOUT_S, description="Seconds to send a request (--read-timeout)"
    )
    allowed_hosts: str = Field(
        default="", description="Host names served besides loopback, comma-separated (--allowed-hosts)"
    )
    insecure_dev: bool = Field(default=False, description="Serve without an admin key, loopback only (--insecure-dev)")
    log_level: str = Field(default="info", description="Log level of `memlane serve` and `memlane mcp` (--log-level)")
    access_log: bool = Field(default=True, description="One log line per request (--access-log)")
    http_keys: Path | None = Field(default=None, description="An earlier memlane's key file to import (--keys)")
    agent_memory_api: bool = Field(
        default=True,
        description="Serve the Agent Memory API's routes at the root, beside /v1 (--agent-memory-api)",
    )
    agent_sync_timeout: float = Field(
        default=DEFAULT_AGENT_SYNC_TIMEOUT_S,
        description="Seconds an Agent Memory add with async_processing false waits for its extraction, the LLM's "
        "retries included, before it answers 502 with the blocks stored (--agent-sync-timeout)",
    )
    oidc_jwks: Path | None = Field(
        default=None,
        description="A JWKS file of the identity provider's public keys: `memlane serve` also takes RS256 "
        "OpenID Connect bearer tokens verified against it (--oidc-jwks)",
    )
    oidc_issuer: str = Field(default="", description="The issuer OIDC tokens must name; empty: any (--oidc-issuer)")
    oidc_audience: str = Field(
        default="", description="The audience OIDC tokens must name; empty: not checked (--oidc-audience)"
    )
    oidc_user_claim: str = Field(default="sub", description="The OIDC claim naming the user (--oidc-user-claim)")
    oidc_role_claim: str = Field(
        default="role",
        description="The OIDC claim naming the role: read-only/ams_ro, read-write/ams_rw, admin/ams_admin (an "
        "admin token acts on any user of the Agent Memory routes) (--oidc-role-claim)",
    )
    health_check_every: float = Field(
        default=DEFAULT_HEALTH_CHECK_EVERY_S,
        description="Seconds between the store's quick integrity checks of `memlane serve`, whose result "
        "/healthz reports; 0: none (--health-check-every)",
    )
    # -- memlane mcp -------------------------------------------------------------------------------------
    mcp_transport: str = Field(default="stdio", description="stdio or http (--transport)")
    mcp_user: str | None = Field(default=None, description="Whose memory, over stdio (--user)")
    mcp_host: str = Field(default="127.0.0.1", description="Address of the MCP HTTP transport (--host)")
    mcp_port: int = Field(default=8421, description="Port of the MCP HTTP transport (--port)")
    # -- data sets and the bench -------------------------------------------------------------------------
    data: Path | None = Field(default=None, description="Folder of the data set files (--data-dir)")
    bench_cache: Path | None = Field(default=None, description="Bench stores; default CACHE_DIR/bench (--cache-dir)")
    bench_embedder: str | None = Field(default=None, description="Embedder of the bench stores (--embedder)")
    bench_ks: str | None = Field(default=None, description="k values of `bench retrieval`, comma-separated (--k)")
    bench_limit: int | None = Field(default=None, description="At most N questions (--limit)")
    bench_per_category: int | None = Field(
        default=None, description="Only the first N questions of each category (--per-category)"
    )
    bench_perspective: str | None = Field(default=None, description="Perspective of the bench stores (--perspective)")
    bench_out: Path | None = Field(default=None, description="Run folder of a bench command (--out)")
    bench_modes: str | None = Field(default=None, description="Search modes, space-separated (--mode)")
    bench_depth: int | None = Field(default=None, description="Blocks retrieved per question (--depth)")
    bench_before_question_date: bool = Field(default=False, description="Search only before the question's day")
    bench_baselines: str | None = Field(default=None, description="Reference retrievers, comma-separated (--baselines)")
    bench_quiet: bool = Field(default=False, description="No progress bars (--quiet)")
    bench_systems: str | None = Field(
        default=None, description="Memory systems `bench retrieval` measures, space-separated (--system)"
    )
    qa_system: str | None = Field(default=None, description="The memory system `bench qa` answers from (--system)")
    bench_compare_categories: bool = Field(default=False, description="`bench compare` per category (--categories)")
    perf_sizes: str | None = Field(default=None, description="Store sizes of `bench perf`, comma-separated (--sizes)")
    perf_store: str | None = Field(default=None, description="Store kind of `bench perf` (--store)")
    perf_out: Path | None = Field(
        default=None, description="Folder for perf.json and perf-curve.png of `bench perf` (--out)"
    )
    ann_threshold: int = Field(
        default=20_000,
        description="Keys from which a user is searched through a per-user approximate index, in every store "
        "memlane opens and in `bench perf`; -1: never (--ann-threshold of bench perf)",
    )
    ann_ef_search: int = Field(
        default=128, description="The approximate index's search beam (--ann-ef-search of bench perf)"
    )
    bench_ann_threshold: int | None = Field(
        default=None,
        description="Keys from which `bench retrieval` uses the approximate index; 0: always (--ann-threshold)",
    )
    # -- bench qa ----------------------------------------------------------------------------------------
    qa_judge_prompts: str | None = Field(default=None, description="Judge prompts of `bench qa` (--judge-prompts)")
    qa_context: str | None = Field(default=None, description="Context the answerer gets (--context)")
    qa_full_context_budget: int | None = Field(default=None, description="Token budget of the full context")
    qa_concurrency: int | None = Field(default=None, description="Questions answered at once (--concurrency)")
    qa_facts: bool = Field(default=False, description="Show extracted facts to the answerer (--facts)")
    qa_extract: bool = Field(default=False, description="Run extraction on the bench stores (--extract)")
    qa_adversarial: bool = Field(default=True, description="Include LoCoMo's adversarial questions (--adversarial)")
    qa_retry_failed: bool = Field(default=False, description="Retry the failed questions of a run (--retry-failed)")
    qa_llm_log: Path | None = Field(default=None, description="LLM call log of `bench qa` (--llm-log)")
    qa_prices: str | None = Field(default=None, description="Model prices, space-separated MODEL=IN/OUT (--price)")
    qa_answer_prompt: str | None = Field(default=None, description="Answer prompt of `bench qa` (--answer-prompt)")
    qa_k: int | None = Field(default=None, description="Blocks the answerer gets (--k)")
    qa_mode: str | None = Field(default=None, description="Search mode of `bench qa` (--mode)")
    qa_sweep_ks: str | None = Field(default=None, description="k values of `bench sweep`, comma-separated (--k)")
    qa_sweep_modes: str | None = Field(default=None, description="Search modes of `bench sweep` (--mode)")
    qa_sweep_answer_prompts: str | None = Field(default=None, description="Answer prompts of `bench sweep`")
    qa_sweep_full_context: bool = Field(default=False, description="Add the full-context baseline to a sweep")

    # -- derived values, for the entry points --------------------------------------------------------------

    def secret(self, name: str) -> str | None:
        """The value of the secret setting ``name`` (an API key), or None if it is not set."""
        value = getattr(self, name)
        return value.get_secret_value() if isinstance(value, SecretStr) else None

    def embedder_config(self) -> EmbedderConfig:
        """What the built-in embedders need: the model cache and the 'openai' embedder's server."""
        return EmbedderConfig(
            cache_dir=self.cache_dir,
            base_url=self.embed_base_url,
            api_key=self.secret("embed_api_key"),
            model=self.embed_model,
            dim=self.embed_dim,
        )

    def memory_options(self) -> dict[str, Any]:
        """Keyword arguments of ``Memory.open`` that come from the environment."""
        return {
            "embedder_config": self.embedder_config(),
            "ann": self.ann_settings(),
            "default_ttl_s": self.default_ttl,
            "max_attempts": self.extraction_attempts,
        }

    def ann_settings(self) -> AnnSettings:
        """When stores search a user through the approximate index (``MEMLANE_ANN_THRESHOLD``, -1: never)."""
        threshold = None if self.ann_threshold < 0 else self.ann_threshold
        return AnnSettings(threshold=threshold, ef_search=self.ann_ef_search)

    def llm_settings(self, **overrides: Any) -> LLMSettings:
        """The OpenAI-compatible client's settings; ``overrides`` (LLMSettings fields) win."""
        return _llm_settings(self.llm_model, self.llm_base_url, self.secret("llm_api_key"), self, overrides)

    def judge_settings(self, **overrides: Any) -> LLMSettings:
        """The judge's settings: ``MEMLANE_JUDGE_*`` one by one, else the LLM's."""
        return _llm_settings(
            self.judge_model or self.llm_model,
            self.judge_base_url or self.llm_base_url,
            self.secret("judge_api_key") or self.secret("llm_api_key"),
            self,
            overrides,
        )


def _llm_settings(
    model: str | None, base_url: str | None, api_key: str | None, s: Settings, overrides: Mapping[str, Any]
) -> LLMSettings:
    values: dict[str, Any] = {"model": model or "", "api_key": api_key or "", "base_url": base_url or DEFAULT_BASE_URL}
    for name, value in (
        ("timeout_s", s.llm_timeout),
        ("max_concurrency", s.llm_max_concurrency),
        ("max_retries", s.llm_max_retries),
    ):
        if value is not None:
            values[name] = value
    values.update({k: v for k, v in overrides.items() if v is not None})
    return LLMSettings(**values)


def default_cache_root() -> Path:
    """Where memlane keeps what it builds (the MiniLM model, the bench stores) unless told otherwise."""
    return Path.home() / ".cache" / "memlane"


def env_var(name: str) -> str:
    """The environment variable of setting ``name`` (a ConfigError for a name :class:`Settings` lacks)."""
    if name not in Settings.model_fields:
        raise ConfigError(f"no setting named {name!r}")
    return ENV_PREFIX + name.upper()


class _Given(Settings):
    """Settings from a given mapping only: pydantic-settings reads ``os.environ`` in every construction of a
    :class:`Settings`, ``model_validate`` included, so a variable of this process would win over the
    mapping (and a bad one be blamed on a variable the mapping holds)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def _validated(values: Mapping[str, Any]) -> Settings:
    """:class:`Settings` holding ``values`` (by field name) and defaults; nothing else is read."""
    return _Given(**values)


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from the process environment (pydantic-settings reads it), or from ``environ`` only (the
    process environment is then not read at all). A value of the wrong type is a ConfigError naming the
    variable and the value."""
    values: dict[str, str] = {}
    if environ is not None:
        known = {env_var(name): name for name in Settings.model_fields}
        values = {known[k.upper()]: v for k, v in environ.items() if k.upper() in known and v}
    try:
        return Settings() if environ is None else _validated(values)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "?"
        raw = first.get("input", "")
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{env_var(field)}={raw!r}: {first['msg']}{more}") from None


def read_setting(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """One setting from the environment (or ``environ`` only), checked, without reading the others (for a
    library default, such as the data folder of the bench, where a bad unrelated variable must not fail
    the call)."""
    env = os.environ if environ is None else environ
    raw = env.get(env_var(name))
    if not raw:
        return Settings.model_fields[name].default
    try:
        return getattr(_validated({name: raw}), name)
    except PydanticValidationError as exc:
        raise ConfigError(f"{env_var(name)}={raw!r}: {exc.errors()[0]['msg']}") from None


def embedder_config_from_env(environ: Mapping[str, str] | None = None) -> EmbedderConfig:
    """The built-in embedders' configuration from ``MEMLANE_CACHE_DIR`` and ``MEMLANE_EMBED_*`` only."""
    names = ("cache_dir", "embed_base_url", "embed_api_key", "embed_model", "embed_dim")
    values = {name: read_setting(name, environ) for name in names}
    return _validated(values).embedder_config()


def bench_cache_from_env(environ: Mapping[str, str] | None = None) -> Path:
    """``MEMLANE_BENCH_CACHE``, else ``<MEMLANE_CACHE_DIR or ~/.cache/memlane>/bench``."""
    bench: Path | None = read_setting("bench_cache", environ)
    cache: Path | None = read_setting("cache_dir", environ)
    return bench or (cache or default_cache_root()) / "bench"


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of ``memlane config show``."""

    name: str
    env: str
    value: Any
    source: str
    secret: bool
    description: str


def entries(settings: Settings, options: Mapping[str, tuple[str, Any]] | None = None) -> list[Entry]:
    """Every setting with its effective value and where it came from: ``default``, ``env NAME``, or
    ``option --x`` for a setting given on the command line (``options``: setting -> (option, value))."""
    out = []
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name)
        source = f"env {env_var(name)}" if name in settings.model_fields_set else "default"
        if options and name in options:
            source, value = f"option {options[name][0]}", options[name][1]
        secret = isinstance(value, SecretStr) or info.annotation == (SecretStr | None)
        if isinstance(value, SecretStr):
            value = MASK if value.get_secret_value() else ""
        elif isinstance(value, Path):
            value = str(value)
        out.append(Entry(name, env_var(name), value, source, secret, info.description or ""))
    return out


def openai_fallbacks(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``: not memlane's own variables, but the ones mem0 (and the
    OpenAI SDK) read when a config names no key or server; the mem0-compatible facade honours them the same way."""
    env = os.environ if environ is None else environ
    return env.get("OPENAI_API_KEY", ""), env.get("OPENAI_BASE_URL") or None
