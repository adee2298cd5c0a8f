"""Providers by name: built-ins and third parties register the same way."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fakeserver import FAKE_API_KEY, FAKE_MODEL, FakeChatServer

from memlane.core.errors import ConfigError
from memlane.core.llm import LLM, CallLog, OpenAIChatClient, ScriptedLLM, llm_names, make_llm, register_llm
from memlane.core.llm.settings import LLMSettings


def test_builtins_are_registered() -> None:
    assert {"openai", "scripted"} <= set(llm_names())


def test_make_scripted_with_options(call_log: CallLog) -> None:
    llm = make_llm("scripted", script=["hi"], call_log=call_log)
    assert isinstance(llm, ScriptedLLM)
    assert llm.complete_text([{"role": "user", "content": "x"}]).text == "hi"
    assert call_log.list(1)[0].model == "scripted"


def test_make_openai_from_settings_or_environment(fake_server: FakeChatServer) -> None:
    settings = LLMSettings(model=FAKE_MODEL, api_key=FAKE_API_KEY, base_url=fake_server.url)
    llm = make_llm("openai", settings=settings, timeout_s=3.0)
    assert isinstance(llm, OpenAIChatClient) and llm.settings.timeout_s == 3.0
    assert llm.complete_text([{"role": "user", "content": "x"}]).text == fake_server.default_content
    llm.close()
    env = {"MEMLANE_LLM_API_KEY": "k", "MEMLANE_LLM_MODEL": "env-model", "MEMLANE_LLM_BASE_URL": fake_server.url}
    from_env = make_llm("openai", environ=env)
    assert isinstance(from_env, OpenAIChatClient) and from_env.model == "env-model"
    from_env.close()
    with pytest.raises(ConfigError, match="MEMLANE_LLM_API_KEY"):
        make_llm("openai", environ={})


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown LLM provider 'nope'; registered: .*openai.*scripted"):
        make_llm("nope")


def test_third_party_registration() -> None:
    name = f"echo-{uuid.uuid4().hex[:8]}"

    def factory(*, settings: LLMSettings | None = None, call_log: CallLog | None = None, **options: Any) -> LLM:
        return ScriptedLLM(lambda messages: messages[-1]["content"], model=options.get("model", "echo"))

    register_llm(name, factory)
    register_llm(name, factory)  # the same factory again is harmless
    llm = make_llm(name, model="echo-2")
    assert llm.model == "echo-2" and llm.complete_text([{"role": "user", "content": "hey"}]).text == "hey"
    assert name in llm_names()


def test_taken_names_need_replace() -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_llm("scripted", lambda **_: ScriptedLLM())
    name = f"swap-{uuid.uuid4().hex[:8]}"
    register_llm(name, lambda **_: ScriptedLLM(model="a"))
    register_llm(name, lambda **_: ScriptedLLM(model="b"), replace=True)
    assert make_llm(name).model == "b"
