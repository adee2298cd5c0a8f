"""Data directory resolution and the data set registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_synth import FIXTURES, make_questions, write_json

from memlane.bench.datasets.catalog import SHIPPED_DIR
from memlane.bench.datasets.registry import (
    DATASETS,
    DatasetNotFound,
    data_dirs,
    dataset_path,
    find_dataset,
    load_dataset,
    open_dataset,
)
from memlane.core.errors import ConfigError, NotFoundError


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No MEMLANE_DATA, and a working directory with a sibling ``shared/datasets`` folder holding LoCoMo: the
    layout of the development machines, which must not be guessed."""
    monkeypatch.delenv("MEMLANE_DATA", raising=False)
    shared = tmp_path / "shared" / "datasets" / "locomo"
    shared.mkdir(parents=True)
    (shared / "locomo10.json").write_bytes((FIXTURES / "locomo_mini.json").read_bytes())
    work = tmp_path / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def test_explicit_wins(no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = no_env / "explicit"
    explicit.mkdir()
    monkeypatch.setenv("MEMLANE_DATA", str(no_env))
    assert data_dirs(explicit) == [("--data-dir", explicit)]
    with pytest.raises(NotFoundError, match="--data-dir"):
        data_dirs(no_env / "missing")


def test_env_var(no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_DATA", str(no_env))
    assert data_dirs(None) == [("MEMLANE_DATA", no_env)]
    monkeypatch.setenv("MEMLANE_DATA", str(no_env / "missing"))
    with pytest.raises(NotFoundError, match="MEMLANE_DATA"):
        data_dirs(None)


def test_no_folder_is_guessed_and_locomo_ships(no_env: Path) -> None:
    # ../shared/datasets exists beside the working directory, but only the shipped copy is used.
    assert data_dirs(None) == []
    found = find_dataset("locomo")
    assert found is not None and found.origin == "shipped"
    assert found.path == SHIPPED_DIR / "locomo" / "locomo10.json.xz"
    assert find_dataset("longmemeval-s") is None


def test_data_dir_wins_over_the_shipped_copy(no_env: Path) -> None:
    found = find_dataset("locomo", no_env / "shared" / "datasets")
    assert found is not None and found.origin == "--data-dir"
    # A data folder without LoCoMo still finds the shipped copy.
    empty = no_env / "empty"
    empty.mkdir()
    found = find_dataset("locomo", empty)
    assert found is not None and found.origin == "shipped"


def test_missing_data_set_explains_where_to_get_it(no_env: Path) -> None:
    with pytest.raises(DatasetNotFound) as err:
        open_dataset("longmemeval-s")
    message = str(err.value)
    for part in ("xiaowu0162/longmemeval-cleaned", "https://", "MEMLANE_DATA", "--data-dir", "memlane datasets"):
        assert part in message
    assert isinstance(err.value, NotFoundError)  # the CLI's exit 3


def test_registry_names() -> None:
    assert set(DATASETS) == {
        "locomo",
        "longmemeval-s",
        "longmemeval-oracle",
        "longmemeval-m",
        "longmemeval-s-x500",
    }


def test_dataset_path_layouts(tmp_path: Path) -> None:
    (tmp_path / "longmemeval").mkdir()
    s = tmp_path / "longmemeval" / "longmemeval_s_cleaned.partial499.json.xz"
    s.write_bytes(b"")
    assert dataset_path("longmemeval-s", tmp_path) == s
    full = tmp_path / "longmemeval" / "longmemeval_s_cleaned.json"
    full.write_bytes(b"")
    assert dataset_path("longmemeval-s", tmp_path) == full  # the complete file is preferred
    flat = tmp_path / "locomo10.json"
    flat.write_bytes(b"")
    assert dataset_path("locomo", tmp_path) == flat


def test_missing_m_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFound, match=r"longmemeval_m_cleaned\.json"):
        dataset_path("longmemeval-m", tmp_path)
    with pytest.raises(ConfigError, match="unknown data set 'longmemeval-l'"):
        dataset_path("longmemeval-l", tmp_path)


def test_open_m_streams_like_s(tmp_path: Path) -> None:
    (tmp_path / "longmemeval").mkdir()
    questions = make_questions(6, n_sessions=30)
    write_json(tmp_path / "longmemeval" / "longmemeval_m_cleaned.json.xz", questions)
    stream = open_dataset("longmemeval-m", tmp_path)
    assert [h.namespace for h in stream] == [q["question_id"] for q in questions]
    assert [h.namespace for h in stream] == [q["question_id"] for q in questions]  # re-iterable
    assert len(stream.sha256()) == 64


def test_load_locomo_via_registry(tmp_path: Path) -> None:
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "locomo10.json").write_bytes((FIXTURES / "locomo_mini.json").read_bytes())
    ds = load_dataset("locomo", tmp_path)
    assert ds.name == "locomo" and len(ds.samples) == 9 and ds.params == {}
