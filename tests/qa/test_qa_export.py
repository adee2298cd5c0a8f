"""The LongMemEval hypothesis file round-trips through a reader of the official format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane.bench.qa.export import read_hypotheses, write_hypotheses
from memlane.core.errors import ValidationError


def official_reader(path: Path) -> list[dict[str, object]]:
    """What ``evaluate_qa.py`` does: JSON per line, else one JSON document."""
    with open(path) as f:
        lines = f.readlines()
    try:
        return [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return list(json.loads("".join(lines)))


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "hypotheses.jsonl"
    pairs = [("e47becba", "Lisbon"), ("gpt4_2_abs", "Not mentioned.\nReally\u2028none"), ("q3", "café {x}")]
    assert write_hypotheses(path, pairs) == 3
    assert official_reader(path) == [{"question_id": q, "hypothesis": h} for q, h in pairs]
    assert read_hypotheses(path) == dict(pairs)
    assert path.read_text().count("\n") == 3


def test_a_json_list_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "hyp.json"
    path.write_text(json.dumps([{"question_id": "a", "hypothesis": "x"}], indent=2))
    assert read_hypotheses(path) == {"a": "x"}


def test_duplicates_and_garbage_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        write_hypotheses(tmp_path / "h.jsonl", [("a", "x"), ("a", "y")])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(ValidationError):
        read_hypotheses(bad)
