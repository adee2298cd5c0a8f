"""The data set families: each named data set points at one, and each answers what the harness asks of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bench_synth import FIXTURES

from memlane.bench.datasets.catalog import CATALOG
from memlane.bench.datasets.families import FAMILIES, LOCOMO, LONGMEMEVAL, Family, family_named
from memlane.bench.datasets.model import Sample, Turn
from memlane.bench.retrieval.metrics import OVERALL, TASK_AVERAGE
from memlane.bench.retrieval.rankings import LocomoRanking, LongMemEvalRanking
from memlane.core.errors import ConfigError
from memlane.core.model import PerspectiveMode


def test_every_data_set_points_at_a_known_family() -> None:
    assert {name: info.family for name, info in CATALOG.items()} == {
        "locomo": LOCOMO,
        "longmemeval-s": LONGMEMEVAL,
        "longmemeval-oracle": LONGMEMEVAL,
        "longmemeval-m": LONGMEMEVAL,
        "longmemeval-s-x500": LONGMEMEVAL,
    }
    assert FAMILIES == {"locomo": LOCOMO, "longmemeval": LONGMEMEVAL}
    assert family_named("locomo") is LOCOMO
    with pytest.raises(ConfigError, match="unknown data set family 'mem0'"):
        family_named("mem0")


@pytest.mark.parametrize(
    ("family", "fixture"), [(LOCOMO, "locomo_mini.json"), (LONGMEMEVAL, "longmemeval_s_mini.json")]
)
def test_turn_ids_name_their_session_and_categories_are_known(family: Family, fixture: str) -> None:
    haystacks = list(family.read(FIXTURES / fixture))
    assert haystacks
    for haystack in haystacks:
        for session in haystack.sessions:
            assert {family.session_of(t.turn_id) for t in session.turns} <= {session.session_id}
        assert {s.category for s in haystack.samples} <= set(family.categories)


def test_target_turns_and_their_text() -> None:
    caption = Turn("D1:3", "Caroline", "Look!", image_caption="a photo of a dog")
    assert LOCOMO.is_target(caption) and LOCOMO.turn_text(caption) == "Look! and shared a photo of a dog."
    assert LOCOMO.turn_text(Turn("D1:4", "Caroline", " ", image_caption="a cat")) == "a cat"
    reply = Turn("s1_2", "assistant", "Sure.", image_caption="ignored")
    assert not LONGMEMEVAL.is_target(reply) and LONGMEMEVAL.is_target(Turn("s1_1", "user", "Hi"))
    assert LONGMEMEVAL.turn_text(reply) == "Sure."
    assert (LOCOMO.perspective, LONGMEMEVAL.perspective) == (PerspectiveMode.SPEAKERS, PerspectiveMode.SINGLE)


def test_report_rows() -> None:
    assert LOCOMO.category_label("temporal") == "2 temporal [mem0: temporal]"
    assert LOCOMO.category_label("single-hop") == "4 single-hop [mem0: open-domain]"
    assert LONGMEMEVAL.category_label("multi-session") == "multi-session"
    headline = LOCOMO.row_filter(LOCOMO.headline_row)
    assert headline is not None and headline("multi-hop") and not headline("adversarial")
    every = LOCOMO.row_filter(OVERALL)
    assert every is not None and every("adversarial")
    one = LONGMEMEVAL.row_filter("knowledge-update")
    assert one is not None and one("knowledge-update") and not one("multi-session")
    assert LONGMEMEVAL.row_filter(TASK_AVERAGE) is None
    assert (LOCOMO.task_averaged, LONGMEMEVAL.task_averaged) == (False, True)


def sample(sample_id: str, namespace: str) -> Sample:
    return Sample(sample_id, namespace, "q?", "a", "temporal", None, (), (), (), False)


def test_rankings_lines_and_split() -> None:
    assert LOCOMO.ranking("conv-1:0", ["session_2"], ["D2:1"]) == LocomoRanking("conv-1:0", ("D2:1",), ("session_2",))
    assert LONGMEMEVAL.ranking("q1", ["s1"], ["s1_1"]) == LongMemEvalRanking("q1", ("s1",), ("s1_1",))
    split = LOCOMO.splitter(f"conv-{i}" for i in range(10))
    sides = [split(sample(f"conv-{i}:0", f"conv-{i}")) for i in range(10)]
    assert sides.count("dev") == 2

    def never() -> Iterator[str]:
        raise AssertionError("LongMemEval's split reads no namespaces")
        yield ""

    lme = LONGMEMEVAL.splitter(never())
    assert {lme(sample(f"q{i}", f"q{i}")) for i in range(40)} == {"dev", "test"}
