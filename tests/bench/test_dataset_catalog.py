"""The shipped LoCoMo copy, file checks against the published digests, and ``memlane datasets``."""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path

import pytest
from bench_synth import FIXTURES
from click.testing import CliRunner

from memlane.bench.datasets import registry
from memlane.bench.datasets.catalog import CATALOG, SHIPPED_DIR
from memlane.bench.datasets.registry import open_dataset, verify_file
from memlane.core.errors import ValidationError
from memlane.interfaces.cli.app import cli, register_all

LOCOMO_SHA256 = "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
SHIPPED = SHIPPED_DIR / "locomo" / "locomo10.json.xz"


@pytest.fixture(autouse=True)
def no_data_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLANE_DATA", raising=False)


def test_the_shipped_locomo_is_the_published_file() -> None:
    content = lzma.decompress(SHIPPED.read_bytes())
    assert hashlib.sha256(content).hexdigest() == LOCOMO_SHA256
    assert (SHIPPED_DIR / "locomo" / "README.md").read_text(encoding="utf-8").count("CC BY-NC 4.0") >= 1
    stream = open_dataset("locomo")
    assert stream.origin == "shipped" and stream.sha256() == LOCOMO_SHA256
    dataset = stream.load()
    assert len(dataset.histories) == 10 and len(dataset.samples) == 1986


def test_a_plain_and_a_compressed_copy_are_one_data_set(tmp_path: Path) -> None:
    # The identity is the content's digest: a store built from either copy is reused by the other.
    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "locomo10.json").write_bytes(lzma.decompress(SHIPPED.read_bytes()))
    plain = open_dataset("locomo", tmp_path)
    assert plain.origin == "--data-dir" and plain.sha256() == open_dataset("locomo").sha256()
    assert plain.verification.status == "matches"


def test_a_damaged_shipped_copy_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.loads(lzma.decompress(SHIPPED.read_bytes()))
    data[0]["qa"][0]["answer"] = "something else"
    (tmp_path / "locomo").mkdir()
    damaged = tmp_path / "locomo" / "locomo10.json.xz"
    damaged.write_bytes(lzma.compress(json.dumps(data).encode()))
    monkeypatch.setattr(registry, "SHIPPED_DIR", tmp_path)
    with pytest.raises(ValidationError) as err:
        open_dataset("locomo")
    message = str(err.value)
    actual = hashlib.sha256(lzma.decompress(damaged.read_bytes())).hexdigest()
    assert str(damaged) in message and LOCOMO_SHA256 in message and actual in message


def test_verify_file_statuses(tmp_path: Path) -> None:
    renamed = tmp_path / "conversations.json.xz"
    renamed.write_bytes(SHIPPED.read_bytes())
    check = verify_file(renamed)
    assert (check.status, check.dataset, check.content_sha256) == ("matches", "locomo", LOCOMO_SHA256)

    other = tmp_path / "locomo10.json"
    other.write_bytes((FIXTURES / "locomo_mini.json").read_bytes())
    check = verify_file(other)
    assert check.status == "differs" and check.expected == LOCOMO_SHA256

    unlisted = tmp_path / "longmemeval_s_cleaned.json"
    unlisted.write_text("[]")
    check = verify_file(unlisted)
    assert check.status == "unlisted" and check.dataset == "longmemeval-s"
    assert check.content_sha256 == hashlib.sha256(b"[]").hexdigest()


def run_cli(*args: str) -> tuple[int, str, str]:
    register_all()
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_datasets_lists_every_data_set_with_where_to_get_it(tmp_path: Path) -> None:
    code, out, _ = run_cli("datasets", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert set(rows) == set(CATALOG)
    assert rows["locomo"]["origin"] == "shipped" and rows["locomo"]["found"] == str(SHIPPED)
    assert rows["longmemeval-s"]["found"] is None
    for row in rows.values():
        assert row["url"].startswith("https://") and row["licence"] and row["files"]
    code, out, _ = run_cli("datasets")
    assert code == 0 and "missing" in out and "CC BY-NC 4.0" in out and "MIT" in out


def test_datasets_verify_exit_codes(tmp_path: Path) -> None:
    code, out, _ = run_cli("datasets", "verify")
    assert code == 0 and "ok, the published locomo10.json.xz" in out
    bad = tmp_path / "locomo10.json"
    bad.write_bytes((FIXTURES / "locomo_mini.json").read_bytes())
    code, out, _ = run_cli("datasets", "verify", str(bad))
    assert code == 1 and "DIFFERS" in out and LOCOMO_SHA256 in out
    code, _, err = run_cli("datasets", "verify", str(tmp_path / "nothing.json"))
    assert code == 3 and "no file at" in err


def test_a_missing_data_set_on_a_bench_command_exits_3_with_guidance(tmp_path: Path) -> None:
    code, _, err = run_cli("bench", "retrieval", "longmemeval-s", "--out", str(tmp_path / "run"))
    assert code == 3
    assert "Traceback" not in err and "memlane datasets" in err and "huggingface.co" in err
    assert not (tmp_path / "run").exists()
