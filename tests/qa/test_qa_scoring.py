"""LoCoMo's official F1 and mem0's token F1 on hand-computed examples."""

from __future__ import annotations

import pytest

from memlane.bench.qa.scoring import (
    adversarial_score,
    answer_tokens,
    locomo_f1,
    mem0_f1,
    multi_answer_f1,
    normalize_answer,
    token_f1,
)
from memlane.core.errors import ValidationError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat, and the Hat!", "cat hat"),  # commas, case, punctuation, a/an/the/and
        ("Don't stop", "dont stop"),  # the apostrophe is punctuation
        ("1,000 dollars", "1000 dollars"),  # commas are deleted, not spaced
        ("A-ha, an apple", "aha apple"),  # "a" inside "aha" is no whole word
        ("Anne  and\tAndy ", "anne andy"),
        ("", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_tokens_are_porter_stemmed() -> None:
    assert answer_tokens("Running dogs, happiness") == ["run", "dog", "happi"]


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("The cats ran", "cat running", 0.5),  # [cat, ran] vs [cat, run]: P = R = 1/2
        ("yoga", "Yoga!", 1.0),
        ("painting and hiking", "hiking", 2 / 3),  # P = 1/2, R = 1
        ("the dog dog dog", "dog", 0.5),  # multiset overlap 1: P = 1/3, R = 1
        ("", "dog", 0.0),
        ("cat", "", 0.0),
        ("a the an", "the", 0.0),  # both normalize to nothing
    ],
)
def test_token_f1(prediction: str, gold: str, expected: float) -> None:
    assert token_f1(prediction, gold) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("Paris, London", "London, Berlin", 0.5),  # London 1, Berlin 0
        ("painting, hiking, swimming", "hiking, painting", 1.0),  # unsplit it would be 0.8
        ("London and Paris", "Paris, London", 2 / 3),  # one prediction part [london, pari] vs each gold part
    ],
)
def test_category_1_splits_on_commas(prediction: str, gold: str, expected: float) -> None:
    assert multi_answer_f1(prediction, gold) == pytest.approx(expected)
    assert locomo_f1(prediction, gold, 1) == pytest.approx(expected)


def test_category_1_split_changes_the_score() -> None:
    assert token_f1("painting, hiking, swimming", "hiking, painting") == pytest.approx(0.8)


def test_category_3_keeps_the_gold_before_the_first_semicolon() -> None:
    gold = "Likely no; she is not a fan"
    assert locomo_f1("likely no", gold, 3) == 1.0
    # Against the whole gold [like, no, she, is, not, fan]: P = 1, R = 1/3.
    assert token_f1("likely no", gold) == pytest.approx(0.5)
    assert locomo_f1("likely no", gold, 4) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("Not mentioned in the conversation", 1.0),
        ("NOT MENTIONED", 1.0),
        ("There is no information available.", 1.0),
        ("The information is not available", 0.0),  # neither phrase, as the official check reads it
        ("She likes jazz", 0.0),
    ],
)
def test_category_5_phrase_check(prediction: str, expected: float) -> None:
    assert adversarial_score(prediction) == expected
    assert locomo_f1(prediction, "jazz", 5) == expected


def test_categories_2_and_4_score_the_whole_strings() -> None:
    assert locomo_f1("7 May 2023", "7 May, 2023", 2) == 1.0
    assert locomo_f1("Paris, London", "London, Paris", 4) == 1.0


def test_unknown_category_is_an_error() -> None:
    with pytest.raises(ValidationError):
        locomo_f1("x", "x", 6)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("The cat sat.", "the cat", 0.8),  # {the, cat, sat} vs {the, cat}: P = 2/3, R = 1
        ("dog dog", "dog", 1.0),  # sets, where the official multiset F1 gives 2/3
        ("running", "run", 0.0),  # no stemming
        ("the cat", "cat", 2 / 3),  # no article removal
        ("", "cat", 0.0),
        ("?!", "cat", 0.0),  # no tokens left
    ],
)
def test_mem0_f1(prediction: str, gold: str, expected: float) -> None:
    assert mem0_f1(prediction, gold) == pytest.approx(expected)
