"""The current-value searches of ``memlane bench perf`` (memlane.bench.perfcurve.measure_current): searches
that reach supersession's value test, timed with and without it."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from memlane.bench.perfcurve import RESTATED, add_restated_facts, measure_current
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.retrieval.settings import PRESETS
from memlane.core.retrieval.supersession import applies
from memlane.core.store.sqlite import SqliteStore

ASKED = datetime(2024, 9, 1, tzinfo=UTC)


def test_every_question_reaches_the_value_test() -> None:
    # Timed searches that supersession does not read would measure the question test, not the step.
    for _, question in RESTATED:
        assert applies(question, PRESETS["hybrid"], ASKED), question


def test_restated_facts_are_searched_both_ways_and_the_newest_telling_comes_first(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder())
    add_restated_facts(mem, "u", random.Random(1), datetime(2024, 6, 1, tzinfo=UTC))
    out = measure_current(mem, "u", 2, "small")
    for name in ("search_current", "search_current_no_supersede"):
        assert out[f"{name}_p50_ms_small"] > 0 and out[f"{name}_p95_ms_small"] >= out[f"{name}_p50_ms_small"]
    assert out["supersede_current_ratio_small"] > 0
    # supersession puts the newest of the three tellings first; the ranking alone does so by chance
    assert out["current_newest_first_small"] == 1.0
    assert out["current_newest_first_no_supersede_small"] < 1.0
