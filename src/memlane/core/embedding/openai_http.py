"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (hosted, vLLM, Ollama, ...)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import httpx
import numpy as np

from memlane.core.embedding.protocol import Vectors, register_embedder
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
    def from_env(cls) -> OpenAIEmbedder:
        """Settings from ``MEMLANE_EMBED_BASE_URL``, ``MEMLANE_EMBED_API_KEY``, ``MEMLANE_EMBED_MODEL``,
        ``MEMLANE_EMBED_DIM``."""
        try:
            return cls(
                base_url=os.environ["MEMLANE_EMBED_BASE_URL"],
                api_key=os.environ["MEMLANE_EMBED_API_KEY"],
                model=os.environ["MEMLANE_EMBED_MODEL"],
                dim=int(os.environ["MEMLANE_EMBED_DIM"]),
            )
        except KeyError as exc:
            raise ConfigError(f"the 'openai' embedder needs the environment variable {exc.args[0]}") from None

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
    register_embedder("openai", OpenAIEmbedder.from_env)
