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


def test_sessions_through_the_cli(env: dict[str, str]) -> None:
    assert run(["user", "create", "alice", "--name", "Alice", "--metadata", '{"team": "blue"}'], env)[0] == 0
    code, out, err = run(
        [
            "session",
            "create",
            "alice",
            "trip",
            "--annotation",
            "topic=travel",
            "--metadata",
            '{"city": "Oslo"}',
            "--ttl",
            "3600",
        ],
        env,
    )
    assert code == 0, err
    s = json.loads(out)
    assert s["session_id"] == "trip" and s["annotations"] == {"topic": "travel"} and s["default_ttl_s"] == 3600
    code, _, err = run(["session", "create", "alice", "trip"], env)
    assert code == 1 and "already exists" in err
    assert run(["session", "create", "alice", "trip", "--exist-ok"], env)[0] == 0
    assert run(["add", "alice", "--session", "trip"], env, json.dumps(MESSAGES))[0] == 0
    code, out, _ = run(["session", "list", "alice", "--json"], env)
    assert json.loads(out)["total"] == 1 and json.loads(out)["items"][0]["blocks"] == 2
    assert "trip" in run(["session", "list", "alice"], env)[1]
    code, out, _ = run(["session", "update", "alice", "trip", "--metadata", '{"city": "Bergen"}'], env)
    assert code == 0 and json.loads(out)["metadata"] == {"city": "Bergen"}
    code, out, _ = run(["session", "end", "alice", "trip"], env)
    assert code == 0 and json.loads(out)["ended"] is True
    code, _, err = run(["session", "end", "alice", "trip"], env)
    assert code == 1 and "ended" in err
    code, _, err = run(["add", "alice", "--session", "trip"], env, json.dumps(MESSAGES))
    assert code == 1 and "ended" in err
    assert json.loads(run(["session", "show", "alice", "trip"], env)[1])["ended_at"]
    code, out, _ = run(["session", "delete", "alice", "trip"], env)
    assert code == 0 and "2 blocks" in out
    assert run(["session", "show", "alice", "trip"], env)[0] == 3


def test_users_with_names_and_metadata(env: dict[str, str]) -> None:
    assert run(["user", "create", "alice", "--name", "Alice", "--metadata", '{"team": "blue"}'], env)[0] == 0
    assert run(["user", "create", "bob", "--metadata", '{"team": "red"}'], env)[0] == 0
    code, _, err = run(["user", "create", "alice"], env)
    assert code == 1 and "exists" in err
    assert run(["user", "create", "alice", "--exist-ok"], env)[0] == 0
    shown = json.loads(run(["user", "show", "alice"], env)[1])
    assert shown["display_name"] == "Alice" and shown["metadata"] == {"team": "blue"}
    code, out, _ = run(["users", "--metadata", "team=blue", "--json"], env)
    assert [u["user"] for u in json.loads(out)] == ["alice"]
    assert [u["user"] for u in json.loads(run(["users", "--name", "Alice", "--json"], env)[1])] == ["alice"]
    updated = json.loads(run(["user", "update", "bob", "--name", "Bob"], env)[1])
    assert updated["display_name"] == "Bob" and updated["metadata"] == {"team": "red"}
    # By part of the name or display name, any case; % is a plain character.
    assert [u["user"] for u in json.loads(run(["users", "--contains", "LIC", "--json"], env)[1])] == ["alice"]
    assert [u["user"] for u in json.loads(run(["users", "--contains", "o", "--json"], env)[1])] == ["bob"]
    assert json.loads(run(["users", "--contains", "%", "--json"], env)[1]) == []


def test_facts_update_ttl_and_filters(env: dict[str, str]) -> None:
    code, out, err = run(
        ["add-fact", "alice", "Alice lives in Ghent.", "Alice has a cat.", "--annotation", "topic=bio", "--json"], env
    )
    assert code == 0, err
    fact_ids = json.loads(out)["block_ids"]
    assert len(fact_ids) == 2
    assert run(["add", "alice", "--session", "s2"], env, json.dumps(MESSAGES))[0] == 0

    code, out, _ = run(["list", "alice", "--kind", "fact", "--ids"], env)
    assert sorted(out.split()) == sorted(fact_ids)
    code, out, _ = run(["list", "alice", "--block-id", fact_ids[0], "--json"], env)
    assert [b["block_id"] for b in json.loads(out)] == [fact_ids[0]]
    assert run(["list", "alice", "--session", "s2", "--kind", "fact", "--ids"], env)[1] == ""
    assert len(run(["list", "alice", "--session", "s2", "--kind", "exchange", "--ids"], env)[1].split()) == 2
    code, out, err = run(["list", "alice", "--kind", "fact", "--limit", "1"], env)
    assert code == 0 and len(out.splitlines()) == 1 and "1 more blocks (2 in all)" in err
    code, _, err = run(["list", "alice", "--conversation", "c", "--kind", "fact"], env)
    assert code == 2 and "--conversation" in err

    code, out, err = run(["update", "alice", fact_ids[0], "--content", "Alice lives in Porto.", "--ttl", "60"], env)
    assert code == 0, err
    block = json.loads(out)
    assert block["message"] == "Alice lives in Porto." and block["ttl_s"] == 60 and block["kind"] == "fact"
    code, out, _ = run(["search", "alice", "Ghent", "--mode", "keyword", "--json"], env)
    assert json.loads(out) == []

    code, out, _ = run(["search", "alice", "Ana Lisbon", "--session", "s2", "--json"], env)
    assert {h["session_id"] for h in json.loads(out)} == {"s2"}
    code, out, _ = run(["search", "alice", "Alice", "--annotation", "topic=bio", "--kind", "fact", "--json"], env)
    assert {h["block_id"] for h in json.loads(out)} == set(fact_ids)
    code, out, _ = run(["search", "alice", "Alice", "--annotation", "topic=bio", "--post-filter", "--json"], env)
    assert {h["block_id"] for h in json.loads(out)} <= set(fact_ids)
    code, out, _ = run(["search", "alice", "Alice", "--ingested-after", "2100-01-01", "--json"], env)
    assert json.loads(out) == []

    code, out, _ = run(["ttl", "alice", "3600", "--session", "s2"], env)
    assert code == 0 and out.startswith("2 blocks")
    code, out, _ = run(["ttl", "alice", "0", "--block-id", fact_ids[1]], env)
    assert code == 0 and out.startswith("1 blocks")


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["add-fact", "alice", "x", "--ttl", "-1"], "--ttl"),
        (["add-fact", "alice", "x", "--annotation", "1bad=x"], "annotations"),
        (["add-fact", "alice", "x", "--prompt", "p@one"], "--prompt"),
        (["search", "alice", "q", "--annotation", "novalue"], "--annotation"),
        (["search", "alice", "q", "--ingested-after", "someday"], "--ingested-after"),
        (["search", "alice", "q", "--kind", "note"], "--kind"),
        (["session", "create", "alice", "s", "--metadata", "[1]"], "--metadata"),
        (["session", "create", "alice", "s", "--metadata", "{bad"], "--metadata"),
        (["ttl", "alice", "-5"], "SECONDS"),
        (["ttl", "alice", "5", "--session", "s", "--block-id", "b"], "--session"),
        (["update", "alice", "b", "--content", "x", "--user-content", "y"], "--content"),
        (["prompt", "create", "bad id", "--text", "x"], "prompt_id"),
        (["prompt", "create", "p"], "--text"),
        (["users", "--metadata", "team"], "--metadata"),
    ],
)
def test_bad_input_exits_2_naming_the_option(env: dict[str, str], args: list[str], where: str) -> None:
    assert run(["add", "alice"], env, json.dumps(MESSAGES))[0] == 0
    code, _, err = run(args, env)
    assert code == 2 and where in err, (code, err)
    assert "Traceback" not in err


def test_prompt_registry_through_the_cli(env: dict[str, str]) -> None:
    code, out, err = run(["prompt", "create", "travel", "--text", "List places.", "--description", "Trips"], env)
    assert code == 0, err
    assert json.loads(out)["current_version"] == 0
    code, out, err = run(["prompt", "update", "travel", "--text", "-"], env, "List places and dates.")
    assert code == 0 and json.loads(out)["current_version"] == 1, err
    assert json.loads(run(["prompt", "show", "travel", "--version", "0"], env)[1])["text"] == "List places."
    assert json.loads(run(["prompt", "show", "travel", "--versions"], env)[1])["total"] == 2
    assert json.loads(run(["prompt", "list", "--json"], env)[1])["total"] == 1
    code, out, err = run(["add-fact", "alice", "I flew to Rome.", "--prompt", "travel@0", "--json"], env)
    assert code == 0, err
    block = json.loads(run(["get", "alice", json.loads(out)["block_ids"][0]], env)[1])
    assert (block["prompt_id"], block["prompt_version"]) == ("travel", 0)
    code, _, err = run(["prompt", "purge", "travel", "--version", "1"], env)
    assert code == 1 and "current" in err
    assert run(["prompt", "archive", "travel"], env)[0] == 0
    assert run(["prompt", "list"], env)[1] == ""
    assert "travel" in run(["prompt", "list", "--archived"], env)[1]
    code, _, err = run(["prompt", "update", "travel", "--description", "x"], env)
    assert code == 1 and "archived" in err
    assert run(["prompt", "purge", "travel"], env)[0] == 0
    assert run(["prompt", "show", "travel"], env)[0] == 3
