"""`memlane search --explain`: a line under each hit saying why it ranked; `--json` carries it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

register_all()

ASKED = datetime(2024, 7, 1, 12, tzinfo=UTC)
QUERY = "what bike did I buy two weeks ago"


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def test_the_cli_prints_why_each_hit_ranked(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    for session, days, text in [("june", 14, "I bought a gravel bike."), ("soup", 60, "We cooked lentil soup.")]:
        messages = json.dumps(chat(text, "Noted."))
        when = (ASKED - timedelta(days=days)).isoformat()
        args = ["add", "alice", "--store", store, "--embedder", "hashing", "--session", session, "--time", when]
        assert runner.invoke(cli, args, input=messages).exit_code == 0
    base = ["search", "alice", QUERY, "--store", store, "--embedder", "hashing", "--at", ASKED.isoformat()]
    out = runner.invoke(cli, [*base, "--explain"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("  1.") and "gravel bike" in lines[0]
    assert "vector #1" in lines[1] and "fused" in lines[1] and "(matched 'two weeks ago')" in lines[1]
    as_json = json.loads(runner.invoke(cli, [*base, "--explain", "--json"]).output)
    assert as_json[0]["explanation"]["time_phrases"] == ["two weeks ago"]
    assert json.loads(runner.invoke(cli, [*base, "--json"]).output)[0]["explanation"] is None


def test_the_cli_says_which_hit_was_moved_up_above_which(tmp_path: Path) -> None:
    store = str(tmp_path / "m.db")
    runner = CliRunner()
    said = [
        ("march", 120, "I have three bikes in the garage: a road bike, a gravel bike and a mountain bike."),
        ("june", 14, "I just bought my fourth bike, so now I have four bikes in the garage."),
    ]
    for session, days, text in said:
        messages = json.dumps(chat(text, "Noted."))
        when = (ASKED - timedelta(days=days)).isoformat()
        args = ["add", "alice", "--store", store, "--embedder", "hashing", "--session", session, "--time", when]
        assert runner.invoke(cli, args, input=messages).exit_code == 0
    base = ["search", "alice", "how many bikes do I have in the garage", "--store", store, "--embedder", "hashing"]
    base += ["--at", ASKED.isoformat()]
    hits = json.loads(runner.invoke(cli, [*base, "--json"]).output)
    newer, older = hits[0]["block_id"], hits[1]["block_id"]
    assert hits[0]["supersedes"] == [older] and hits[1]["supersedes"] == []
    lines = runner.invoke(cli, base).output.splitlines()
    assert lines[0].startswith("  1.") and "fourth bike" in lines[0]
    assert lines[1].strip() == f"moved up above {older}: it restates them"
    assert lines[2].startswith("  2.") and lines[3].strip() == f"restated by newer {newer}"
