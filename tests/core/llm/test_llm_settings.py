"""LLM settings: built from the environment at the edge, no default key, clear errors."""

from __future__ import annotations

import pytest

from memlane.core.errors import ConfigError
from memlane.core.llm.settings import DEFAULT_BASE_URL, LLMSettings
from memlane.settings import load

ENV = {"MEMLANE_LLM_API_KEY": "k", "MEMLANE_LLM_MODEL": "qwen"}


def test_from_env_reads_the_memlane_variables() -> None:
    settings = LLMSettings.from_env(
        {**ENV, "MEMLANE_LLM_BASE_URL": "http://127.0.0.1:8765/v1", "MEMLANE_LLM_TIMEOUT": "2.5"}
    )
    assert (settings.api_key, settings.model, settings.base_url) == ("k", "qwen", "http://127.0.0.1:8765/v1")
    assert settings.timeout_s == 2.5
    assert LLMSettings.from_env(ENV).base_url == DEFAULT_BASE_URL


def test_overrides_win_over_the_environment() -> None:
    settings = LLMSettings.from_env(ENV, model="other", max_concurrency=2)
    assert (settings.model, settings.max_concurrency) == ("other", 2)
    with pytest.raises(ConfigError, match="unknown LLM settings: colour"):
        LLMSettings.from_env(ENV, colour="red")


@pytest.mark.parametrize("env", [{}, {"MEMLANE_LLM_MODEL": "m"}, {"MEMLANE_LLM_MODEL": "m", "MEMLANE_LLM_API_KEY": ""}])
def test_missing_key_is_a_config_error(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="MEMLANE_LLM_API_KEY"):
        LLMSettings.from_env(env)


def test_missing_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="MEMLANE_LLM_MODEL"):
        LLMSettings.from_env({"MEMLANE_LLM_API_KEY": "k"})


def test_the_process_environment_is_read_at_the_edge_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_LLM_API_KEY", "from-env")
    monkeypatch.setenv("MEMLANE_LLM_MODEL", "m")
    assert load().llm_settings().api_key == "from-env"
    with pytest.raises(TypeError):  # the core takes a mapping; it never reads os.environ itself
        LLMSettings.from_env()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"base_url": "127.0.0.1:8765"}, "http:// or https://"),
        ({"timeout_s": 0}, "timeout"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_retries": -1}, "retry counts"),
        ({"backoff_cap_s": -1.0}, "backoff"),
    ],
)
def test_contradictory_settings(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LLMSettings.from_env(ENV, **changes)


def test_bad_number_in_environment() -> None:
    with pytest.raises(ConfigError, match="MEMLANE_LLM_MAX_RETRIES must be a number"):
        LLMSettings.from_env({**ENV, "MEMLANE_LLM_MAX_RETRIES": "many"})


def test_key_is_not_in_repr() -> None:
    assert "s3cret" not in repr(LLMSettings(model="m", api_key="s3cret"))
