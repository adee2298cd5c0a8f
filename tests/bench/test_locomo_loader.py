"""LoCoMo loader on a hand-made fixture in the real schema."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from bench_synth import FIXTURES

from memlane.bench.datasets.locomo import load_locomo, locomo_session_of
from memlane.bench.datasets.model import Dataset
from memlane.core.errors import ValidationError


@pytest.fixture
def ds() -> Dataset:
    return load_locomo(FIXTURES / "locomo_mini.json")


def by_id(ds: Dataset, sample_id: str) -> Any:
    return next(s for s in ds.samples if s.sample_id == sample_id)


def test_namespaces_and_ids(ds: Dataset) -> None:
    assert list(ds.histories) == ["conv-a", "conv-b"]
    assert [s.sample_id for s in ds.samples][:3] == ["conv-a:0", "conv-a:1", "conv-a:2"]
    assert ds.samples[-1].sample_id == "conv-b:0"
    assert ds.samples_for("conv-b")[0].namespace == "conv-b"
    assert ds.name == "locomo"


def test_sha256_is_of_file_bytes(ds: Dataset) -> None:
    assert ds.sha256 == hashlib.sha256((FIXTURES / "locomo_mini.json").read_bytes()).hexdigest()


def test_sessions_in_numeric_order_and_orphan_dates_ignored(ds: Dataset) -> None:
    sessions = ds.histories["conv-a"]
    assert [s.session_id for s in sessions] == ["session_1", "session_2", "session_10"]
    assert sessions[0].started_at is not None
    assert (sessions[0].started_at.year, sessions[0].started_at.hour, sessions[0].started_at.minute) == (
        2023,
        13,
        56,
    )
    assert any("session_11..session_12" in n for n in ds.notes)


def test_session_without_date_has_none(ds: Dataset) -> None:
    s2 = ds.histories["conv-b"][1]
    assert s2.session_id == "session_2" and s2.started_at is None
    assert "conv-b: session_2 has no date" in ds.notes


def test_turns(ds: Dataset) -> None:
    turn = ds.histories["conv-a"][0].turns[1]
    assert (turn.turn_id, turn.role, turn.image_caption) == ("D1:2", "Ben", "a painting of a sunrise")
    assert turn.has_answer is None
    assert ds.histories["conv-a"][0].turns[0].image_caption is None


def test_integer_answers_become_strings(ds: Dataset) -> None:
    assert by_id(ds, "conv-a:0").answer == "2022"
    assert by_id(ds, "conv-b:0").answer == "3"


def test_category_names(ds: Dataset) -> None:
    s = by_id(ds, "conv-a:1")
    assert (s.category_number, s.category, s.category_mem0) == (1, "multi-hop", "single-hop")
    s = by_id(ds, "conv-a:3")
    assert (s.category_number, s.category, s.category_mem0) == (4, "single-hop", "open-domain")
    assert by_id(ds, "conv-a:4").category == "open-domain"
    assert by_id(ds, "conv-a:0").category == "temporal"


def test_adversarial_without_answer_uses_adversarial_answer(ds: Dataset) -> None:
    s = by_id(ds, "conv-a:5")
    assert s.answer == "it is brown" and s.adversarial_answer == "it is brown"
    assert s.is_abstention and s.category == "adversarial"
    both = by_id(ds, "conv-a:6")
    assert both.answer == "No" and both.adversarial_answer == "Yes" and both.is_abstention
    assert not by_id(ds, "conv-a:0").is_abstention


def test_semicolon_and_space_separated_evidence_is_split(ds: Dataset) -> None:
    s = by_id(ds, "conv-a:1")
    assert s.evidence_turn_ids == ("D1:1", "D2:2")
    assert s.raw_evidence == ("D1:1; D2:2",)
    assert by_id(ds, "conv-a:2").evidence_turn_ids == ("D2:1", "D1:2", "D10:1")
    assert by_id(ds, "conv-a:2").evidence_session_ids == ("session_2", "session_1", "session_10")


def test_malformed_ids_repaired_or_dropped(ds: Dataset) -> None:
    s = by_id(ds, "conv-a:3")  # "D:2:2", "D", "D10:01"
    assert s.evidence_turn_ids == ("D2:2", "D10:1")
    assert any("dropped unparseable evidence 'D'" in n for n in ds.notes)


def test_dangling_ids_keep_existing_session_only(ds: Dataset) -> None:
    s = by_id(ds, "conv-a:7")  # "D1:9" (no such turn), "D9:1" (no such session), "D2:1" twice
    assert s.evidence_turn_ids == ("D2:1",)
    assert s.evidence_session_ids == ("session_1", "session_2")
    assert s.user_evidence_turn_ids == s.evidence_turn_ids


def test_empty_evidence_stays_empty(ds: Dataset) -> None:
    s = by_id(ds, "conv-a:4")
    assert s.evidence_turn_ids == () and s.evidence_session_ids == () and s.question_date is None


def test_session_of() -> None:
    assert locomo_session_of("D12:3") == "session_12"
    with pytest.raises(ValidationError):
        locomo_session_of("D:1:2")


def _mutated(tmp_path: Path, mutate: Any) -> Path:
    data = json.loads((FIXTURES / "locomo_mini.json").read_text())
    mutate(data)
    out = tmp_path / "bad_locomo.json"
    out.write_text(json.dumps(data))
    return out


def _del_answer(d: Any) -> None:
    del d[0]["qa"][2]["answer"]


def _bad_category(d: Any) -> None:
    d[0]["qa"][1]["category"] = 6


def _float_answer(d: Any) -> None:
    d[1]["qa"][0]["answer"] = 2.5


def _dup_dia(d: Any) -> None:
    d[0]["conversation"]["session_2"][1]["dia_id"] = "D2:1"


def _wrong_session_dia(d: Any) -> None:
    d[0]["conversation"]["session_2"][0]["dia_id"] = "D3:1"


def _bad_date(d: Any) -> None:
    d[0]["conversation"]["session_2_date_time"] = "sometime in May"


def _evidence_not_list(d: Any) -> None:
    d[1]["qa"][0]["evidence"] = "D2:1"


def _missing_text(d: Any) -> None:
    del d[1]["conversation"]["session_1"][0]["text"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_del_answer, ["sample_id=conv-a", "qa[2]", "'answer'"]),
        (_bad_category, ["sample_id=conv-a", "field qa[1].category"]),
        (_float_answer, ["sample_id=conv-b", "field qa[0].answer"]),
        (_dup_dia, ["sample_id=conv-a", "conversation.session_2[1]", "duplicate dia_id"]),
        (_wrong_session_dia, ["sample_id=conv-a", "does not belong to session_2"]),
        (_bad_date, ["sample_id=conv-a", "field conversation.session_2_date_time", "sometime in May"]),
        (_evidence_not_list, ["sample_id=conv-b", "field qa[0].evidence", "expected a list"]),
        (_missing_text, ["sample_id=conv-b", "conversation.session_1[0]", "'text'"]),
    ],
)
def test_errors_name_file_item_and_field(
    tmp_path: Path,
    mutate: Any,
    expected: list[str],
) -> None:
    path = _mutated(tmp_path, mutate)
    with pytest.raises(ValidationError) as err:
        load_locomo(path)
    message = str(err.value)
    assert "bad_locomo.json" in message
    for part in expected:
        assert part in message


def test_invalid_json_and_wrong_top_level(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"sample_id": ')
    with pytest.raises(ValidationError, match=r"broken\.json.*invalid JSON"):
        load_locomo(broken)
    obj = tmp_path / "object.json"
    obj.write_text('{"sample_id": "x"}')
    with pytest.raises(ValidationError, match=r"object\.json.*expected a list"):
        load_locomo(obj)
    with pytest.raises(ValidationError, match="file not found"):
        load_locomo(tmp_path / "missing.json")
