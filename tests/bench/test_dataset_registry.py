"""Data directory resolution and the data set registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_synth import FIXTURES, make_questions, write_json

from memlane.bench.datasets import (
    DATASETS,
    dataset_path,
    load_dataset,
    open_dataset,
    registry,
    resolve_data_dir,
)
from memlane.core.errors import ConfigError


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No MEMLANE_DATA, and a repository root without a sibling shared folder."""
    monkeypatch.delenv("MEMLANE_DATA", raising=False)
    fake_repo = tmp_path / "elsewhere" / "repo"
    fake_repo.mkdir(parents=True)
    monkeypatch.setattr(registry, "_repo_root", lambda: fake_repo)
    return tmp_path


def test_explicit_wins(no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = no_env / "explicit"
    explicit.mkdir()
    monkeypatch.setenv("MEMLANE_DATA", str(no_env))
    assert resolve_data_dir(explicit) == explicit
    with pytest.raises(ConfigError, match="--data-dir"):
        resolve_data_dir(no_env / "missing")


def test_env_var(no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_DATA", str(no_env))
    assert resolve_data_dir(None) == no_env
    monkeypatch.setenv("MEMLANE_DATA", str(no_env / "missing"))
    with pytest.raises(ConfigError, match="MEMLANE_DATA"):
        resolve_data_dir(None)


def test_sibling_shared_folder_of_cwd(no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = no_env / "shared" / "datasets"
    shared.mkdir(parents=True)
    work = no_env / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    assert resolve_data_dir(None).resolve() == shared.resolve()


def test_nothing_found_explains_origin(no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = no_env / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ConfigError) as err:
        resolve_data_dir(None)
    message = str(err.value)
    for origin in ("snap-research/LoCoMo", "xiaowu0162/longmemeval-cleaned", "MEMLANE_DATA", "--data-dir"):
        assert origin in message


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
    with pytest.raises(ConfigError, match="LongMemEval_M is not available"):
        dataset_path("longmemeval-m", tmp_path)
    with pytest.raises(ConfigError, match="unknown data set 'longmemeval-l'"):
        dataset_path("longmemeval-l", tmp_path)
    with pytest.raises(ConfigError, match=r"no locomo10\.json"):
        dataset_path("locomo", tmp_path)


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
