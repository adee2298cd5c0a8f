"""The memory model through the CLI: annotations on add, and (as the core grows them) sessions, facts,
updates, TTL, search filters and the prompt registry. Bad input exits 2 naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

register_all()

MESSAGES = [
    {"role": "user", "content": "My sister Ana moved to Lisbon."},
    {"role": "assistant", "content": "Lisbon is a great city."},
]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, input=stdin, env=env)
    return res.exit_code, res.stdout, res.stderr


def test_add_with_annotations(env: dict[str, str]) -> None:
    args = ["add", "alice", "--annotation", "topic=family", "--annotation", "note=a=b", "--json"]
    code, out, err = run(args, env, json.dumps(MESSAGES))
    assert code == 0, err
    block_id = json.loads(out)["block_ids"][0]
    code, out, _ = run(["get", "alice", block_id], env)
    assert json.loads(out)["annotations"] == {"topic": "family", "note": "a=b"}


@pytest.mark.parametrize("pair", ["topic", "=x"])
def test_bad_annotation_exits_2(env: dict[str, str], pair: str) -> None:
    code, _, err = run(["add", "alice", "--annotation", pair], env, json.dumps(MESSAGES))
    assert code == 2 and "--annotation" in err and "KEY=VALUE" in err
