"""LongMemEval loader: hand-made S/oracle fixtures, error messages, and the streaming path."""

from __future__ import annotations

import hashlib
import itertools
import json
import lzma
from pathlib import Path
from typing import Any

import pytest
from bench_synth import FIXTURES, make_questions, write_json

from memlane.bench.datasets.longmemeval import iter_longmemeval, load_longmemeval
from memlane.bench.datasets.model import Dataset
from memlane.core.errors import ValidationError


@pytest.fixture
def s_mini() -> Dataset:
    return load_longmemeval(FIXTURES / "longmemeval_s_mini.json")


def test_names_ids_and_namespaces(s_mini: Dataset) -> None:
    assert s_mini.name == "longmemeval_s_mini"
    assert list(s_mini.histories) == ["7e5a1001", "c0ffee01_abs", "a5515701"]
    assert [s.namespace for s in s_mini.samples] == list(s_mini.histories)


def test_integer_answer_cast(s_mini: Dataset) -> None:
    assert s_mini.samples[0].answer == "3"


def test_question_date_and_type(s_mini: Dataset) -> None:
    s = s_mini.samples[0]
    assert s.question_date is not None
    assert (s.question_date.month, s.question_date.day, s.question_date.hour) == (5, 30, 10)
    assert s.question_date.utcoffset() is not None
    assert s.category == "temporal-reasoning" and s.category_number is None


def test_within_day_disorder_is_sorted_by_full_timestamp(s_mini: Dataset) -> None:
    sessions = s_mini.histories["7e5a1001"]
    assert [s.session_id for s in sessions] == [
        "answer_7e5a1001_1",
        "sharegpt_aaa_0",
        "f00d0001",
        "answer_7e5a1001_2",
    ]
    starts = [s.started_at for s in sessions]
    assert starts == sorted(starts)  # type: ignore[type-var]
    assert "7e5a1001: haystack re-ordered by full session timestamp" in s_mini.notes


def test_turn_ids_are_one_based_counting_both_roles(s_mini: Dataset) -> None:
    evidence = s_mini.histories["7e5a1001"][0]
    assert [t.turn_id for t in evidence.turns] == [f"answer_7e5a1001_1_{i}" for i in (1, 2, 3, 4)]
    assert [t.role for t in evidence.turns] == ["user", "assistant", "user", "assistant"]


def test_has_answer_flags(s_mini: Dataset) -> None:
    sessions = s_mini.histories["7e5a1001"]
    assert [t.has_answer for t in sessions[0].turns] == [False, False, True, False]
    assert all(t.has_answer is None for t in sessions[1].turns)  # S: absent outside evidence sessions
    s = s_mini.samples[0]
    assert s.evidence_session_ids == ("answer_7e5a1001_2", "answer_7e5a1001_1")
    assert s.evidence_turn_ids == ("answer_7e5a1001_1_3", "answer_7e5a1001_2_1")
    assert s.user_evidence_turn_ids == s.evidence_turn_ids


def test_assistant_only_evidence_has_no_user_targets(s_mini: Dataset) -> None:
    s = s_mini.samples[2]
    assert s.evidence_turn_ids == ("answer_a5515701_3",)
    assert s.user_evidence_turn_ids == ()


def test_abstention_flag(s_mini: Dataset) -> None:
    assert [s.is_abstention for s in s_mini.samples] == [False, True, False]


def test_repeated_session_id_kept_once_at_earliest_date(s_mini: Dataset) -> None:
    sessions = s_mini.histories["c0ffee01_abs"]
    assert [s.session_id for s in sessions] == ["sharegpt_dup_0", "answer_c0ffee01_abs"]
    assert sessions[0].started_at is not None and sessions[0].started_at.day == 25
    assert any("repeated session 'sharegpt_dup_0' dropped" in n for n in s_mini.notes)


def test_empty_content_is_kept(s_mini: Dataset) -> None:
    assert s_mini.histories["7e5a1001"][2].turns[1].content == ""


def test_oracle_schema() -> None:
    ds = load_longmemeval(FIXTURES / "longmemeval_oracle_mini.json")
    sessions = ds.histories["0a1b2c3d"]
    assert [s.session_id for s in sessions] == ["answer_0a1b2c3d_1", "answer_0a1b2c3d_2"]
    assert all(t.has_answer is not None for s in sessions for t in s.turns)
    assert ds.samples[0].evidence_session_ids == ("answer_0a1b2c3d_1", "answer_0a1b2c3d_2")


def test_xz_gives_the_same_dataset_and_identity(tmp_path: Path) -> None:
    raw = (FIXTURES / "longmemeval_s_mini.json").read_bytes()
    xz = tmp_path / "longmemeval_s_mini.json.xz"
    xz.write_bytes(lzma.compress(raw))
    plain = load_longmemeval(FIXTURES / "longmemeval_s_mini.json")
    packed = load_longmemeval(xz)
    assert packed.name == plain.name
    assert packed.samples == plain.samples and packed.histories == plain.histories
    # The identity is the digest of the content, whatever the compression.
    assert packed.sha256 == hashlib.sha256(raw).hexdigest() == plain.sha256


def _write_mutated(tmp_path: Path, mutate: Any) -> Path:
    data = json.loads((FIXTURES / "longmemeval_s_mini.json").read_text())
    mutate(data)
    return write_json(tmp_path / "bad_lme.json", data)


def _set(index: int, key: str, value: Any) -> Any:
    def mutate(d: Any) -> None:
        d[index][key] = value

    return mutate


def _delete(index: int, key: str) -> Any:
    def mutate(d: Any) -> None:
        del d[index][key]

    return mutate


def _turn(index: int, session: int, turn: int, key: str, value: Any) -> Any:
    def mutate(d: Any) -> None:
        d[index]["haystack_sessions"][session][turn][key] = value

    return mutate


def _different_duplicate(d: Any) -> None:
    d[1]["haystack_sessions"][2][0]["content"] = "changed"


def _duplicate_question(d: Any) -> None:
    d.append(d[0])


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_delete(0, "question_type"), ["question_id=7e5a1001", "'question_type'"]),
        (_set(1, "question_type", "trivia"), ["question_id=c0ffee01_abs", "field question_type", "trivia"]),
        (_set(0, "answer", None), ["question_id=7e5a1001", "field answer"]),
        (_set(2, "question_date", "yesterday"), ["question_id=a5515701", "field question_date"]),
        (_set(0, "haystack_dates", ["2023/05/20 (Sat) 14:00"]), ["question_id=7e5a1001", "differ in length"]),
        (_set(2, "answer_session_ids", ["answer_zzz"]), ["question_id=a5515701", "field answer_session_ids"]),
        (_turn(0, 1, 0, "role", "system"), ["question_id=7e5a1001", "field haystack_sessions[1][0].role"]),
        (_turn(0, 1, 2, "has_answer", "yes"), ["question_id=7e5a1001", "haystack_sessions[1][2].has_answer"]),
        (_turn(2, 1, 0, "content", 5), ["question_id=a5515701", "haystack_sessions[1][0].content"]),
        (_different_duplicate, ["question_id=c0ffee01_abs", "'sharegpt_dup_0' appears twice"]),
        (_duplicate_question, ["item 3", "duplicate question_id '7e5a1001'"]),
        (_delete(1, "question_id"), ["item 1", "'question_id'"]),
        (_delete(2, "haystack_dates"), ["question_id=a5515701", "'haystack_dates'"]),
    ],
)
def test_errors_name_file_question_and_field(
    tmp_path: Path,
    mutate: Any,
    expected: list[str],
) -> None:
    path = _write_mutated(tmp_path, mutate)
    with pytest.raises(ValidationError) as err:
        load_longmemeval(path)
    message = str(err.value)
    assert "bad_lme.json" in message
    for part in expected:
        assert part in message


def test_top_level_object_is_rejected(tmp_path: Path) -> None:
    path = write_json(tmp_path / "obj.json", {"question_id": "x"})
    with pytest.raises(ValidationError, match=r"obj\.json.*expected a JSON array"):
        list(iter_longmemeval(path))


def test_truncated_json_names_last_good_question(tmp_path: Path) -> None:
    text = (FIXTURES / "longmemeval_s_mini.json").read_text()
    cut = text.index('"question_id": "a5515701"') + 40
    path = tmp_path / "cut.json"
    path.write_text(text[:cut])
    with pytest.raises(ValidationError, match=r"cut\.json.*after question_id=c0ffee01_abs"):
        list(iter_longmemeval(path))


def test_corrupt_xz(tmp_path: Path) -> None:
    path = tmp_path / "bad.json.xz"
    path.write_bytes(lzma.compress(b"[" + b" " * 10000 + b"]")[:-30] + b"garbage")
    with pytest.raises(ValidationError, match=r"bad\.json\.xz"):
        list(iter_longmemeval(path))


# -- streaming on generated data --------------------------------------------------------------------------


def test_stream_generated_xz(tmp_path: Path) -> None:
    questions = make_questions(50, n_sessions=15)
    path = write_json(tmp_path / "longmemeval_s_cleaned.json.xz", questions)
    stream = iter_longmemeval(path)
    first = next(stream)
    assert first.namespace == questions[0]["question_id"]
    rest = list(stream)
    assert len(rest) == 49
    assert all(len(h.sessions) == 15 and len(h.samples) == 1 for h in [first, *rest])
    assert sum(h.samples[0].is_abstention for h in [first, *rest]) == 5
    assert rest[6].samples[0].answer == "7"  # generated as the integer 7


def test_stream_is_lazy(tmp_path: Path) -> None:
    questions = make_questions(20, n_sessions=5)
    questions[10]["question_type"] = "broken"
    path = write_json(tmp_path / "lazy.json.xz", questions)
    head = list(itertools.islice(iter_longmemeval(path), 10))
    assert [h.namespace for h in head] == [q["question_id"] for q in questions[:10]]
    with pytest.raises(ValidationError, match="question_id=synth0010"):
        list(iter_longmemeval(path))
