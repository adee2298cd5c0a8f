"""Counting prompt tokens without a model's tokenizer.

Context sizes (the full-context budget, "mean context tokens per question") are measured before any call,
with no network: ``tiktoken`` downloads its encodings on first use, so it cannot serve here. The default
counter is OpenAI's rule of thumb for English, one token per four characters, rounded up. It is an
estimate, recorded by name with every figure it produces; the tokens the server bills are the ones in
each call's usage (``LLMResult.tokens_in``/``tokens_out``), which the cost figures use.
"""

from __future__ import annotations

from typing import Protocol


class TokenCounter(Protocol):
    """Counts the tokens of a text. ``name`` is recorded next to every count."""

    @property
    def name(self) -> str:
        """An id such as ``approx-chars/4``."""
        ...

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


class CharsPerToken:
    """``ceil(len(text) / chars)`` tokens: the documented approximation (4 characters per token)."""

    def __init__(self, chars: int = 4) -> None:
        if chars < 1:
            raise ValueError("chars must be at least 1")
        self.chars = chars

    @property
    def name(self) -> str:
        """``approx-chars/<chars>``."""
        return f"approx-chars/{self.chars}"

    def count(self, text: str) -> int:
        """Characters (code points) divided by ``chars``, rounded up."""
        return -(-len(text) // self.chars)


DEFAULT_COUNTER: TokenCounter = CharsPerToken()
