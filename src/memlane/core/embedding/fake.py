"""A deterministic embedder for tests: hashed bag of words, no model.

Texts that share words get similar vectors, so ranking tests behave like a (weak) real embedder.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from memlane.core.embedding.protocol import Vectors, register_embedder

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Feature-hashed, L2-normalised word counts (plus character trigrams of each word for paraphrases)."""

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim
        self.calls = 0
        self.texts_embedded = 0

    @property
    def model_id(self) -> str:
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                for feat in (word, *(word[i : i + 3] for i in range(max(0, len(word) - 2)))):
                    h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                    out[row, h % self._dim] += 1.0 if feat == word else 0.3
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
            else:
                out[row, 0] = 1.0
        return out


def register() -> None:
    register_embedder("hashing", HashingEmbedder)
