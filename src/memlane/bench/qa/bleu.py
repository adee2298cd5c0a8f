"""BLEU-1 as the mem0-lineage LoCoMo tables compute it.

Definition (mem0 ``evaluation/metrics/utils.py``, from A-Mem)::

    sentence_bleu([word_tokenize(gold.lower())], word_tokenize(prediction.lower()),
                  weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1)

which, with one reference, is ``BP * m / c``: ``m`` = unigram matches clipped by the reference counts,
``c`` = prediction tokens, ``r`` = reference tokens, ``BP = 1`` if ``c > r`` else ``exp(1 - r / c)``; and 0
when ``m = 0`` (NLTK returns 0 before any smoothing when no unigram matches; method1 only smooths the
zero-weighted higher orders). mem0 scores 0 when either raw string is empty. The score itself is NLTK's
``sentence_bleu``, called as above.

Tokenization: ``nltk.word_tokenize`` splits sentences with NLTK's *trained English Punkt model*, a data
package (``punkt_tab``) that must be downloaded and that memlane may not fetch at run time. :func:`word_tokens`
uses the same two stages with Punkt's built-in defaults instead: sentences split at every ``.``/``?``/``!``
followed by white space, then NLTK's Treebank word tokenizer on each sentence. The result equals
``word_tokenize`` except after abbreviations the English model knows (``dr. seuss`` gives ``dr`` ``.``
``seuss`` here, ``dr.`` ``seuss`` there), which short answers rarely contain.
"""

from __future__ import annotations

from nltk.tokenize.destructive import NLTKWordTokenizer  # type: ignore[import-untyped]
from nltk.tokenize.punkt import PunktSentenceTokenizer  # type: ignore[import-untyped]
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu  # type: ignore[import-untyped]

BLEU1_WEIGHTS = (1.0, 0.0, 0.0, 0.0)
TOKENIZER_ID = "nltk-treebank+punkt-untrained"
"""Names the tokenization of :func:`word_tokens`, for run logs."""

_SENTENCES = PunktSentenceTokenizer()
_WORDS = NLTKWordTokenizer()
_SMOOTHING = SmoothingFunction().method1


def word_tokens(text: str) -> list[str]:
    """Word tokens of ``text`` (see the module docstring for how they differ from ``nltk.word_tokenize``)."""
    return [token for sentence in _SENTENCES.tokenize(text) for token in _WORDS.tokenize(sentence)]


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1 of ``prediction`` against the single reference ``gold``, lower-cased (mem0's definition)."""
    if not prediction or not gold:
        return 0.0
    hypothesis = word_tokens(prediction.strip().lower())
    reference = word_tokens(gold.strip().lower())
    return float(sentence_bleu([reference], hypothesis, weights=BLEU1_WEIGHTS, smoothing_function=_SMOOTHING))
