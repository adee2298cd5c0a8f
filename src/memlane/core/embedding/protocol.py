"""The embedder seam: a narrow protocol, a content-hash cache in front of it, and a registry by name."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memlane.core.errors import ConfigError
from memlane.core.model import content_hash

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of ``dim`` dimensions, in input order."""

    @property
    def model_id(self) -> str:
        """Names the model and its build, so cached vectors of another model are never mixed in."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed in batches; returns an array of shape ``(len(texts), dim)``."""
        ...


class EmbeddingCache(Protocol):
    """Vectors keyed by (model id, content hash), kept by a store so no text is embedded twice."""

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]: ...

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None: ...


class CachedEmbedder:
    """An embedder that first looks each text up by content hash and embeds only the misses, once each."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors, new = self.embed_deferred(texts)
        if new:
            self.cache.put_vectors(self.model_id, new)
        return vectors

    def embed_deferred(self, texts: Sequence[str]) -> tuple[Vectors, dict[str, Vectors]]:
        """Embed, returning the vectors and the new cache entries *without* writing them, so a store can
        write them in the same transaction as the blocks (one commit per add instead of two)."""
        hashes = [content_hash(t) for t in texts]
        found = self.cache.get_vectors(self.model_id, list(dict.fromkeys(hashes)))
        missing: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            if h not in found and h not in missing:
                missing[h] = t
        new: dict[str, Vectors] = {}
        if missing:
            vecs = self.inner.embed(list(missing.values()))
            new = {h: vecs[i] for i, h in enumerate(missing)}
            found.update(new)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), new
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False), new


@dataclass(frozen=True, slots=True)
class EmbedderConfig:
    """What the built-in embedders are configured with, filled at the edge (``memlane.settings``): where
    the MiniLM model is built and cached (default ``~/.cache/memlane``), and the server of the ``openai``
    embedder. The core reads no environment variable."""

    cache_dir: Path | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    dim: int | None = None


# A factory takes the EmbedderConfig if it has a parameter; one without parameters is called without it.
EmbedderFactory = Callable[..., Embedder]
_REGISTRY: dict[str, EmbedderFactory] = {}
_builtins_registered = False


def register_embedder(name: str, factory: EmbedderFactory) -> None:
    """Make an embedder constructible by name (built-ins register through this same call). ``factory``
    is called with the :class:`EmbedderConfig` if it takes an argument, else with none."""
    _REGISTRY[name] = factory


def make_embedder(name: str, config: EmbedderConfig | None = None) -> Embedder:
    """Build the embedder registered under ``name``."""
    _register_builtins()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown embedder {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None
    if _takes_config(factory):
        return factory(config or EmbedderConfig())
    return factory()


def _takes_config(factory: EmbedderFactory) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in positional and p.default is inspect.Parameter.empty for p in params)


def _register_builtins() -> None:
    global _builtins_registered
    if _builtins_registered:
        return
    _builtins_registered = True
    from memlane.core.embedding import fake, minilm, openai_http

    minilm.register()
    fake.register()
    openai_http.register()
