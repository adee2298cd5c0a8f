"""The dev/test split depends on ids only and is stable."""

from __future__ import annotations

from memlane.bench.split import dev_conversations, question_split


def test_question_split_is_about_a_fifth_and_deterministic() -> None:
    ids = [f"q{i:04d}" for i in range(2000)]
    dev = [i for i in ids if question_split(i) == "dev"]
    assert 300 < len(dev) < 500
    assert [question_split(i) for i in ids] == [question_split(i) for i in ids]


def test_locomo_dev_conversations_do_not_depend_on_order() -> None:
    convs = [f"conv-{n}" for n in (26, 30, 41, 42, 43, 44, 47, 48, 49, 50)]
    dev = dev_conversations(convs)
    assert dev == dev_conversations(list(reversed(convs)) + convs)
    assert dev == frozenset({"conv-47", "conv-48"})
    assert len(dev_conversations(convs[:3])) == 1
