"""Every CLI command that deletes takes the deleted words out of the LLM call log beside the store too
(`memlane delete-user`, `memlane delete`, `memlane retention apply`), so nothing of them is left in any
file beside the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

register_all()
MARKER = "quokkazanzibar"


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, input=stdin, env=env)
    return res.exit_code, res.stdout, res.stderr


def chat(text: str) -> str:
    return json.dumps([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MEMLANE_STORE": str(tmp_path / "s.db"), "MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "scripted"}


def files_holding(folder: Path, needle: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_file() and needle.encode() in p.read_bytes())


def calls(tmp_path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(tmp_path / "s.db.calls.db") as db:
        return [(str(n), b) for n, b in db.execute("SELECT namespace, block_id FROM llm_calls ORDER BY id")]


def add(env: dict[str, str], user: str, text: str, *more: str) -> list[str]:
    code, out, err = run(["add", user, "--extract", "sync", "--json", *more], env, chat(text))
    assert code == 0, err
    return list(json.loads(out)["block_ids"])


def test_delete_user_deletes_their_llm_calls(env: dict[str, str], tmp_path: Path) -> None:
    add(env, "erin", f"My {MARKER} plays the oboe.")
    add(env, "fay", "Fay keeps bees.")
    assert {"s.db", "s.db.calls.db"} <= set(files_holding(tmp_path, MARKER))  # the words are there to find
    assert run(["delete-user", "erin"], env)[0] == 0
    assert files_holding(tmp_path, MARKER) == []
    assert {n for n, _ in calls(tmp_path)} == {"fay"}


def test_delete_deletes_one_blocks_calls(env: dict[str, str], tmp_path: Path) -> None:
    gone = add(env, "erin", f"My {MARKER} plays the oboe.", "--perspective", "single")
    kept = add(env, "erin", "Erin drinks tea.", "--perspective", "single")
    code, out, err = run(["delete", "erin", gone[0]], env)
    assert code == 0 and out == f"deleted block {gone[0]} of erin\n", err
    assert files_holding(tmp_path, MARKER) == []
    assert calls(tmp_path) == [("erin", kept[0])]
    code, _, err = run(["delete", "erin", gone[0]], env)
    assert code == 3 and "not found" in err


def test_retention_apply_deletes_the_calls_of_expired_blocks(env: dict[str, str], tmp_path: Path) -> None:
    add(env, "erin", f"My {MARKER} plays the oboe.", "--time", "2024-01-01T12:00:00Z")
    kept = add(env, "erin", "Erin drinks tea.", "--time", "2024-03-01T12:00:00Z")
    assert run(["retention", "set", "--max-age-days", "30"], env)[0] == 0
    code, out, err = run(["retention", "apply", "--at", "2024-03-02T00:00:00Z", "--json"], env)
    assert code == 0 and json.loads(out)["expired"] == 2, err
    assert files_holding(tmp_path, MARKER) == []
    assert sorted(b for _, b in calls(tmp_path) if b) == sorted(kept)


def test_an_explicit_call_log_is_the_one_cleaned(env: dict[str, str], tmp_path: Path) -> None:
    env = env | {"MEMLANE_LLM_LOG": str(tmp_path / "elsewhere.db")}
    add(env, "erin", f"My {MARKER} plays the oboe.")
    assert "elsewhere.db" in files_holding(tmp_path, MARKER)
    assert run(["delete-user", "erin"], env)[0] == 0
    assert files_holding(tmp_path, MARKER) == []
