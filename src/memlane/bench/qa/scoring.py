"""Lexical answer scores: LoCoMo's official F1 and the token F1 of the mem0-lineage tables.

**LoCoMo official F1** (``task_eval/evaluation.py`` of snap-research/locomo, reproduced exactly):

1. ``normalize_answer``: delete every comma; lower-case; delete ASCII punctuation (``string.punctuation``);
   replace the whole words ``a``, ``an``, ``the`` and ``and`` by a space; collapse white space.
2. Split on white space and stem every token with NLTK's Porter stemmer.
3. Overlap = multiset intersection of the two token lists. F1 = 0 when it is empty, else the harmonic mean
   of precision (overlap / prediction tokens) and recall (overlap / gold tokens).
4. Per category: 1 (multi-hop) splits prediction and gold on commas (raw strings), strips each part, and
   averages over gold parts the best F1 against any prediction part; 2 and 4 score the whole strings;
   3 first cuts the gold at its first ``;`` (and strips it); 5 (adversarial) scores 1 iff the lower-cased
   prediction contains ``no information available`` or ``not mentioned``, else 0.

**mem0 token F1** (``evaluation/metrics/utils.py`` of mem0ai/mem0, from A-Mem): lower-case; replace ``.``
``,`` ``!`` ``?`` by spaces; split; F1 over the *sets* of tokens (no stemming, no article removal). 0 when
either string is empty or has no tokens. This is the "F1" column of the mem0 paper's LoCoMo table; it is
not comparable with the official F1.
"""

from __future__ import annotations

import string
from collections import Counter
from functools import lru_cache

import regex
from nltk.stem.porter import PorterStemmer  # type: ignore[import-untyped]

from memlane.core.errors import ValidationError

ADVERSARIAL_PHRASES = ("no information available", "not mentioned")
"""A category-5 prediction scores 1 iff its lower-cased text contains one of these (official rule)."""

_PUNCTUATION = frozenset(string.punctuation)
# The `regex` module, as in the official code: its word boundaries count combining marks as word characters,
# where `re` does not, which changes the result on some non-ASCII text.
_ARTICLES = regex.compile(r"\b(a|an|the|and)\b")
_STEMMER = PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    # Porter stemming is the slow part and answers repeat the same words: cache per word.
    return str(_STEMMER.stem(word))


def normalize_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer`` (steps in the official order)."""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """Normalized, Porter-stemmed tokens, as LoCoMo's ``f1_score`` compares them."""
    return [_stem(w) for w in normalize_answer(text).split()]


def _f1(prediction: list[str], gold: list[str]) -> float:
    same = sum((Counter(prediction) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = same / len(prediction)
    recall = same / len(gold)
    return (2 * precision * recall) / (precision + recall)


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo's ``f1_score``: multiset F1 of normalized, stemmed tokens (categories 2 and 4)."""
    return _f1(answer_tokens(prediction), answer_tokens(gold))


def multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo's ``f1`` for category 1: mean over comma-separated gold parts of the best part F1."""
    predictions = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in predictions) for g in golds) / len(golds)


def adversarial_score(prediction: str) -> float:
    """Category 5: 1.0 iff the prediction says the information is not there (official phrase check)."""
    lowered = prediction.lower()
    return 1.0 if any(phrase in lowered for phrase in ADVERSARIAL_PHRASES) else 0.0


def open_domain_gold(gold: str) -> str:
    """Category 3 gold as the official scorer uses it: the text before the first ``;``, stripped."""
    return gold.split(";")[0].strip()


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """The official LoCoMo QA score of one prediction (see the module docstring for each category)."""
    if category == 1:
        return multi_answer_f1(prediction, gold)
    if category in (2, 4):
        return token_f1(prediction, gold)
    if category == 3:
        return token_f1(prediction, open_domain_gold(gold))
    if category == 5:
        return adversarial_score(prediction)
    raise ValidationError(f"LoCoMo category must be 1-5, got {category!r}", where="category")


def mem0_tokens(text: str) -> list[str]:
    """mem0's ``simple_tokenize``."""
    return text.lower().replace(".", " ").replace(",", " ").replace("!", " ").replace("?", " ").split()


def mem0_f1(prediction: str, gold: str) -> float:
    """The mem0-lineage token F1 (sets of tokens; see the module docstring)."""
    if not prediction or not gold:
        return 0.0
    pred, ref = set(mem0_tokens(prediction.strip())), set(mem0_tokens(gold.strip()))
    if not pred or not ref:
        return 0.0
    common = len(pred & ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
