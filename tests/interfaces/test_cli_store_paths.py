"""A mistyped store path is an error, not an empty store: read-only commands exit 3 with "no store at PATH"
and create nothing; add, init (and serve, mcp) create the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

register_all()

MESSAGES = [{"role": "user", "content": "My sister Ana moved to Lisbon."}, {"role": "assistant", "content": "Nice."}]
READ_ONLY = [
    ["search", "alice", "where does Ana live"],
    ["list", "alice"],
    ["get", "alice", "0123456789abcdef"],
    ["users"],
    ["delete-user", "alice"],
    ["queue", "status"],
    ["worker", "--drain", "--llm", "scripted"],
    ["compact"],
]


def run(args: list[str], store: Path, stdin: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, input=stdin, env={"MEMLANE_STORE": str(store), "MEMLANE_EMBEDDER": "hashing"})
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a[:2]))
def test_a_read_only_command_on_a_missing_store_exits_3_and_creates_nothing(args: list[str], tmp_path: Path) -> None:
    typo = tmp_path / "sub" / "typo.db"
    code, out, err = run(args, typo)
    assert code == 3, out + err
    assert err.strip() == f"error: no store at {typo}"
    assert not (tmp_path / "sub").exists()  # not the file, its -wal, its call log, nor the folder


@pytest.mark.parametrize("content", [b"", b"not a database at all, just text"])
def test_a_file_that_is_no_store_is_refused_and_left_as_it_is(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    code, _, err = run(["users"], path)
    assert code in (1, 3) and str(path) in err
    assert path.read_bytes() == content


def test_a_sqlite_file_of_something_else_is_no_store(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t(x)")
    code, _, err = run(["search", "alice", "q"], path)
    assert code == 3 and "no store at" in err
    with sqlite3.connect(path) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["t"]


def test_llm_log_without_a_call_log_exits_3(tmp_path: Path) -> None:
    code, _, err = run(["llm", "log"], tmp_path / "typo.db")
    assert code == 3 and "no LLM call log at" in err and list(tmp_path.iterdir()) == []


def test_init_and_add_create_the_store_then_reads_work(tmp_path: Path) -> None:
    store = tmp_path / "new" / "memlane.db"
    code, out, _ = run(["init"], store)
    assert code == 0 and out.strip() == f"created a store at {store}" and store.is_file()
    code, out, _ = run(["users", "--json"], store)
    assert code == 0 and json.loads(out) == []
    code, out, _ = run(["init"], store)
    assert code == 0 and "exists" in out
    other = tmp_path / "added.db"
    assert run(["add", "alice"], other, json.dumps(MESSAGES))[0] == 0  # add creates a store on first use
    code, out, _ = run(["search", "alice", "where does Ana live", "--json"], other)
    assert code == 0 and "Lisbon" in json.loads(out)[0]["message"]


def test_the_help_says_which_commands_create(tmp_path: Path) -> None:
    code, out, _ = run(["--help"], tmp_path / "x.db")
    assert code == 0 and "Only add, serve, mcp and init create it" in " ".join(out.split())
    code, out, _ = run(["search", "--help"], tmp_path / "x.db")
    assert code == 0 and "exit 3 if there is none" in " ".join(out.split())
