"""BLEU-1: hand-computed values, the documented closed form against NLTK, and the tokenization."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from memlane.bench.qa.bleu import bleu1, word_tokens


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("the cat sat on the mat", "the cat is on the mat", 5 / 6),  # 5 clipped matches of 6, BP = 1
        ("cat", "the cat is here", math.exp(1 - 4 / 1)),  # p1 = 1, BP = exp(1 - r/c) with r = 4, c = 1
        ("the the the", "the cat", 1 / 3),  # "the" clipped to 1 match; c > r so BP = 1
        ("Paris.", "paris", 0.5),  # lower-cased; "." is a token: c = 2 > r = 1
        ("She went to Paris last May", "Paris", 1 / 6),
        ("dog", "cat", 0.0),  # no unigram match: 0 before any smoothing
        ("", "cat", 0.0),
        ("cat", "", 0.0),
    ],
)
def test_bleu1_hand_computed(prediction: str, gold: str, expected: float) -> None:
    assert bleu1(prediction, gold) == pytest.approx(expected, abs=1e-12)


def _closed_form(hyp: list[str], ref: list[str]) -> float:
    matches = sum((Counter(hyp) & Counter(ref)).values())
    if not hyp or matches == 0:
        return 0.0
    c, r = len(hyp), len(ref)
    penalty = 1.0 if c > r else math.exp(1 - r / c)
    return penalty * matches / c


@settings(max_examples=150, deadline=None)
@given(
    hyp=st.lists(st.sampled_from("abcdefg"), max_size=12),
    ref=st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=12),
)
def test_documented_definition_equals_nltk(hyp: list[str], ref: list[str]) -> None:
    nltk_value = sentence_bleu([ref], hyp, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1)
    assert nltk_value == pytest.approx(_closed_form(hyp, ref), abs=1e-12)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("i went home. then i ate.", ["i", "went", "home", ".", "then", "i", "ate", "."]),
        ('caroline\'s mom, said "hi!"', ["caroline", "'s", "mom", ",", "said", "``", "hi", "!", "''"]),
        ("7 may 2023", ["7", "may", "2023"]),
        # The documented difference: the English Punkt model knows "dr." and would keep it whole.
        ("dr. seuss books", ["dr", ".", "seuss", "books"]),
        ("", []),
    ],
)
def test_word_tokens(text: str, tokens: list[str]) -> None:
    assert word_tokens(text) == tokens


def test_word_tokens_equal_nltk_word_tokenize_where_its_model_is_installed() -> None:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        pytest.skip("NLTK's punkt_tab data is not installed (memlane does not need it)")
    for text in ["i went home. then i ate.", "she moved to lisbon in 2022.", "yoga, hiking and painting!"]:
        assert word_tokens(text) == nltk.word_tokenize(text)
