"""Embedders: the protocol, the offline ONNX MiniLM default, a deterministic fake and an HTTP client."""

from memlane.core.embedding.protocol import (
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    make_embedder,
    register_embedder,
)

__all__ = ["CachedEmbedder", "Embedder", "EmbeddingCache", "make_embedder", "register_embedder"]
