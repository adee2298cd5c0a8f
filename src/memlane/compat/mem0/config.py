"""A mem0 configuration dict read as memlane settings: what maps is taken, the rest is listed and warned about.

mem0's ``Memory.from_config`` takes ``vector_store``, ``embedder``, ``llm``, ``history_db_path``,
``graph_store``, ``reranker``, ``version`` and custom prompts. memlane keeps blocks, vectors and the keyword
index in one store and embeds with its own model, so only these map:

* ``vector_store.config.path`` -> the SQLite store: a path ending in ``.db``/``.sqlite``/``.sqlite3`` is the
  file; any other path is a folder that gets ``memlane.db``. ``vector_store.config.connection_string`` (or
  ``url``) starting with ``postgresql://`` -> the PostgreSQL store.
* ``embedder`` whose model is all-MiniLM-L6-v2 -> memlane's default embedder, the same model.
* ``llm`` with provider ``openai`` (or any OpenAI-compatible server: ``openai_base_url``) -> memlane's
  extraction LLM (``model``, ``api_key`` or ``$OPENAI_API_KEY``, ``openai_base_url`` or
  ``$OPENAI_BASE_URL``).
* ``memlane`` (memlane's own key): ``store`` and ``embedder`` as :meth:`memlane.core.memory.Memory.open` takes them.

Everything else is ignored with one warning naming each ignored key, and kept in ``Mem0Settings.ignored``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlane.core.errors import ValidationError
from memlane.core.llm.settings import DEFAULT_BASE_URL, LLMSettings
from memlane.settings import openai_fallbacks

DEFAULT_STORE = "memlane.db"
DEFAULT_EMBEDDER = "minilm"
STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
MINILM_NAMES = ("all-minilm-l6-v2", "all-minilm")


@dataclass(frozen=True, slots=True)
class Mem0Settings:
    """What a mem0 configuration dict says to memlane; ``ignored`` lists the keys (dotted) that do not apply."""

    store: str = DEFAULT_STORE
    embedder: str = DEFAULT_EMBEDDER
    llm: LLMSettings | None = None
    ignored: tuple[str, ...] = field(default_factory=tuple)


def _section(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name) or {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"must be a dict, not {type(value).__name__}", where=f"config.{name}")
    return dict(value)


def _inner(section: dict[str, Any], name: str) -> dict[str, Any]:
    value = section.get("config") or {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"must be a dict, not {type(value).__name__}", where=f"config.{name}.config")
    return dict(value)


def read_config(config: Mapping[str, Any] | None) -> Mem0Settings:
    """Map a mem0 configuration dict; see the module doc for what maps."""
    if config is None:
        return Mem0Settings()
    if not isinstance(config, Mapping):
        raise ValidationError(f"must be a dict, not {type(config).__name__}", where="config")
    ignored: list[str] = []
    store, embedder, llm = DEFAULT_STORE, DEFAULT_EMBEDDER, None
    for key in config:
        if key not in ("vector_store", "embedder", "llm", "memlane"):
            ignored.append(str(key))

    vs = _section(config, "vector_store")
    vs_config = _inner(vs, "vector_store")
    for key in vs_config:
        if key == "path" and isinstance(vs_config[key], str | Path):
            path = Path(vs_config[key])
            store = str(path if path.suffix in STORE_SUFFIXES else path / DEFAULT_STORE)
        elif key in ("connection_string", "url") and str(vs_config[key]).startswith(("postgresql://", "postgres://")):
            store = str(vs_config[key])
        else:
            ignored.append(f"vector_store.config.{key}")
    if "provider" in vs:
        ignored.append("vector_store.provider")

    emb = _section(config, "embedder")
    emb_config = _inner(emb, "embedder")
    model = str(emb_config.get("model", "")).lower()
    if emb and not any(name in model for name in MINILM_NAMES):
        ignored.append("embedder")

    llm_section = _section(config, "llm")
    if llm_section:
        llm, skipped = _llm(llm_section, _inner(llm_section, "llm"))
        ignored.extend(skipped)

    own = _section(config, "memlane")
    if "store" in own:
        store = str(own["store"])
    if "embedder" in own:
        embedder = str(own["embedder"])
    ignored.extend(f"memlane.{key}" for key in own if key not in ("store", "embedder"))
    return Mem0Settings(store=store, embedder=embedder, llm=llm, ignored=tuple(ignored))


def _llm(section: dict[str, Any], config: dict[str, Any]) -> tuple[LLMSettings | None, list[str]]:
    provider = str(section.get("provider", "openai"))
    if provider != "openai":
        return None, ["llm"]
    skipped = [f"llm.config.{k}" for k in config if k not in ("model", "api_key", "openai_base_url")]
    env_key, env_url = openai_fallbacks()
    api_key = config.get("api_key") or env_key
    base_url = config.get("openai_base_url") or env_url or DEFAULT_BASE_URL
    model = config.get("model") or "gpt-4.1-nano"
    return LLMSettings(model=str(model), api_key=str(api_key), base_url=str(base_url)), skipped
