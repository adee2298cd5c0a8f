"""LLM providers by name. Built-ins (``openai``, ``scripted``) register through :func:`register_llm`, the
same call a third-party provider makes.

A factory is called as ``factory(settings=..., call_log=..., **options)`` and returns an
:class:`~memlane.core.llm.protocol.LLM`; it may ignore ``settings`` (the scripted fake does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from memlane.core.errors import ConfigError
from memlane.core.llm.calllog import CallLog
from memlane.core.llm.protocol import LLM
from memlane.core.llm.settings import LLMSettings

LLMFactory = Callable[..., LLM]

_REGISTRY: dict[str, LLMFactory] = {}
_LOCK = threading.RLock()
_builtins_loaded = False


def register_llm(name: str, factory: LLMFactory, *, replace: bool = False) -> None:
    """Make an LLM provider constructible by ``name``; a taken name (built-ins too) needs ``replace=True``."""
    _load_builtins()
    with _LOCK:
        if name in _REGISTRY and not replace and _REGISTRY[name] is not factory:
            raise ConfigError(f"an LLM provider named {name!r} is already registered")
        _REGISTRY[name] = factory


def llm_names() -> list[str]:
    """The registered provider names, sorted."""
    _load_builtins()
    with _LOCK:
        return sorted(_REGISTRY)


def make_llm(name: str, *, settings: LLMSettings | None = None, call_log: CallLog | None = None, **options: Any) -> LLM:
    """Build the provider registered under ``name``.

    ``openai`` takes its settings from ``settings`` or else from the environment, with any
    :class:`~memlane.core.llm.settings.LLMSettings` field in ``options`` overriding (plus ``transport``,
    ``sleep``, ``rng``, ``use_cache``, ``environ``). ``scripted`` takes ``script``, ``fail_on`` and ``model``.
    """
    _load_builtins()
    with _LOCK:
        factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(f"unknown LLM provider {name!r}; registered: {', '.join(llm_names())}")
    return factory(settings=settings, call_log=call_log, **options)


def _load_builtins() -> None:
    global _builtins_loaded
    with _LOCK:
        if _builtins_loaded:
            return
        _builtins_loaded = True
        from memlane.core.llm import openai_client, scripted

        openai_client.register()
        scripted.register()
