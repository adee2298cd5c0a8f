"""rankings.jsonl writer and validating reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane.bench.retrieval.rankings import (
    LocomoRanking,
    LongMemEvalRanking,
    iter_rankings,
    locomo_sessions_from_dia_ids,
    read_rankings,
    sessions_in_order,
    write_rankings,
)
from memlane.core.errors import ValidationError


def test_roundtrip_longmemeval(tmp_path: Path) -> None:
    rankings = [
        LongMemEvalRanking("q1", ("answer_a", "s_2"), ("answer_a_1", "s_2_3")),
        LongMemEvalRanking("q2_abs", (), ()),
    ]
    path = tmp_path / "rankings.jsonl"
    assert write_rankings(path, rankings) == 2
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "question_id": "q1",
        "ranked_session_ids": ["answer_a", "s_2"],
        "ranked_turn_ids": ["answer_a_1", "s_2_3"],
    }
    assert read_rankings(path) == {"q1": rankings[0], "q2_abs": rankings[1]}
    assert not (tmp_path / "rankings.jsonl.tmp").exists()


def test_roundtrip_locomo(tmp_path: Path) -> None:
    ranking = LocomoRanking(
        "conv-26:0", ("D3:5", "D1:2", "D3:1"), locomo_sessions_from_dia_ids(["D3:5", "D1:2", "D3:1"])
    )
    assert ranking.ranked_session_ids == ("session_3", "session_1")
    path = tmp_path / "r.jsonl"
    write_rankings(path, [ranking])
    assert json.loads(path.read_text()) == {
        "qa_id": "conv-26:0",
        "ranked_dia_ids": ["D3:5", "D1:2", "D3:1"],
        "ranked_session_ids": ["session_3", "session_1"],
    }
    assert list(iter_rankings(path)) == [ranking]


def test_sessions_in_order() -> None:
    assert sessions_in_order(["b", "a", "b", "c", "a"]) == ("b", "a", "c")


def test_constructor_rejects_duplicates() -> None:
    with pytest.raises(ValidationError, match="q1: ranked_turn_ids"):
        LongMemEvalRanking("q1", (), ("t_1", "t_1"))


def test_writer_rejects_mixed_kinds_and_repeated_ids(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="mixed"):
        write_rankings(tmp_path / "m.jsonl", [LongMemEvalRanking("q", (), ()), LocomoRanking("c:0", (), ())])
    with pytest.raises(ValidationError, match="duplicate question id 'q'"):
        write_rankings(
            tmp_path / "d.jsonl",
            [LongMemEvalRanking("q", (), ()), LongMemEvalRanking("q", (), ())],
        )


GOOD = '{"question_id": "q1", "ranked_session_ids": ["s"], "ranked_turn_ids": ["s_1"]}'


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"question_id": "q2", "ranked_session_ids": []}', "match neither"),
        (
            '{"question_id": "q2", "ranked_session_ids": [], "ranked_turn_ids": [], "extra": 1}',
            "match neither",
        ),
        ('{"question_id": "", "ranked_session_ids": [], "ranked_turn_ids": []}', "field question_id"),
        (
            '{"question_id": "q2", "ranked_session_ids": [3], "ranked_turn_ids": []}',
            "field ranked_session_ids",
        ),
        (
            '{"question_id": "q2", "ranked_session_ids": "s", "ranked_turn_ids": []}',
            "field ranked_session_ids",
        ),
        ('{"question_id": "q2", "ranked_session_ids": ["a", "a"], "ranked_turn_ids": []}', "duplicate ids"),
        (GOOD, "duplicate question id 'q1'"),
        ('{"qa_id": "c:1", "ranked_dia_ids": [], "ranked_session_ids": []}', "mixes"),
    ],
)
def test_reader_errors_name_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    path = tmp_path / "rankings.jsonl"
    path.write_text(GOOD + "\n\n" + bad_line + "\n")
    with pytest.raises(ValidationError) as err:
        read_rankings(path)
    assert f"{path}:3" in str(err.value)
    assert message in str(err.value)


def test_reader_skips_blank_lines_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n" + GOOD + "\n\n")
    assert list(read_rankings(path)) == ["q1"]
    with pytest.raises(ValidationError, match="file not found"):
        read_rankings(tmp_path / "nope.jsonl")
