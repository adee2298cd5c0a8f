"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (hosted, vLLM, Ollama, ...)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np

from memlane.core.embedding.protocol import EmbedderConfig, Vectors, register_embedder
from memlane.core.errors import ConfigError, EmbedderError


class OpenAIEmbedder:
    """Calls ``POST {base_url}/embeddings`` in batches; vectors are L2-normalised on arrival."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        dim: int,
        batch_size: int = 64,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not api_key:
            raise ConfigError("the OpenAI-compatible embedder needs an API key (MEMLANE_EMBED_API_KEY)")
        self._model = model
        self._dim = dim
        self._batch = batch_size
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    @classmethod
    def from_config(cls, config: EmbedderConfig) -> OpenAIEmbedder:
        """The embedder ``config`` describes (the CLI fills it from ``MEMLANE_EMBED_BASE_URL``,
        ``MEMLANE_EMBED_API_KEY``, ``MEMLANE_EMBED_MODEL``, ``MEMLANE_EMBED_DIM``)."""
        for value, var in (
            (config.base_url, "MEMLANE_EMBED_BASE_URL"),
            (config.api_key, "MEMLANE_EMBED_API_KEY"),
            (config.model, "MEMLANE_EMBED_MODEL"),
            (config.dim, "MEMLANE_EMBED_DIM"),
        ):
            if not value:
                raise ConfigError(f"the 'openai' embedder needs the environment variable {var}")
        assert config.base_url and config.api_key and config.model and config.dim  # narrowed by the loop
        return cls(base_url=config.base_url, api_key=config.api_key, model=config.model, dim=config.dim)

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for start in range(0, len(texts), self._batch):
            chunk = list(texts[start : start + self._batch])
            try:
                resp = self._client.post("/embeddings", json={"model": self._model, "input": chunk})
                resp.raise_for_status()
                data = sorted(resp.json()["data"], key=lambda d: d["index"])
                vecs = np.array([d["embedding"] for d in data], dtype=np.float32)
            except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
                raise EmbedderError(f"embedding request to {self._client.base_url} failed: {exc}") from exc
            if vecs.shape != (len(chunk), self._dim):
                raise EmbedderError(f"expected {len(chunk)} vectors of {self._dim} dimensions, got {vecs.shape}")
            out[start : start + len(chunk)] = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return out


def register() -> None:
    register_embedder("openai", OpenAIEmbedder.from_config)
