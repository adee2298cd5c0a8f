"""The CLI mirrors the API: add from stdin or a file, search with --json, delete-user; errors exit non-zero."""

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


def test_add_search_delete_round_trip(env: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = run(
        ["add", "alice", "--session", "s1", "--time", "1:56 pm on 8 May, 2023", "--json"], env, json.dumps(MESSAGES)
    )
    assert code == 0, out
    assert len(json.loads(out)["block_ids"]) == 2
    f = tmp_path / "more.json"
    f.write_text(json.dumps([{"role": "user", "content": "I bought a red bike."}]))
    assert run(["add", "alice", "--file", str(f), "--perspective", "single"], env)[0] == 0

    code, out, _ = run(["search", "alice", "where does Ana live", "-k", "2", "--json"], env)
    assert code == 0
    hits = json.loads(out)
    assert len(hits) == 2
    for key in ("block_id", "score", "message", "time", "perspective", "session_id", "summary", "facts"):
        assert key in hits[0]
    assert "Lisbon" in hits[0]["message"] and hits[0]["time"].startswith("2023-05-08T13:56")

    code, out, _ = run(["search", "alice", "bike", "--mode", "keyword", "--before", "2023-05-09"], env)
    assert code == 0 and "bike" not in out  # the bike was added "now", after the window
    # "Two days ago" read on 10 May 2023 points at Ana's session of 8 May; read now, at the bike added now.
    query = ["search", "alice", "what did I say two days ago", "-k", "3", "--json"]
    code, out, _ = run([*query, "--at", "2023-05-10T12:00:00Z"], env)
    assert code == 0
    then = {"bike" in h["message"]: h["score"] for h in json.loads(out)}
    code, out, _ = run(query, env)
    assert code == 0
    now = {"bike" in h["message"]: h["score"] for h in json.loads(out)}
    assert then[False] > now[False] and now[True] > then[True]

    code, out, _ = run(["delete-user", "alice"], env)
    assert code == 0 and "3 blocks" in out
    code, out, _ = run(["search", "alice", "Lisbon", "--json"], env)
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["add", "alice"], "not json", "stdin: not JSON"),
        (["add", "alice"], json.dumps({"role": "user"}), "expected a JSON list"),
        (["add", "alice"], json.dumps([{"role": "user", "content": ""}]), "messages[0].content"),
        (["add", "alice", "--time", "someday"], json.dumps(MESSAGES), "time: cannot parse time"),
        (["search", "alice", "q", "--mode", "psychic"], None, "unknown search mode"),
    ],
)
def test_bad_input_gets_a_clear_error(env: dict[str, str], args: list[str], stdin: str | None, message: str) -> None:
    assert run(["init"], env)[0] == 0  # a store to search: without one, search exits 3 before reading its input
    code, _, err = run(args, env, stdin)
    assert code == 2
    assert message in err


def test_unknown_block_is_exit_3(env: dict[str, str]) -> None:
    run(["add", "alice"], env, json.dumps(MESSAGES))
    code, _, err = run(["get", "alice", "nope"], env)
    assert code == 3 and "not found" in err


def test_list_and_users(env: dict[str, str]) -> None:
    run(["add", "bob", "--perspective", "single"], env, json.dumps(MESSAGES))
    code, out, _ = run(["list", "bob", "--json"], env)
    assert code == 0 and len(json.loads(out)) == 1
    code, out, _ = run(["users", "--json"], env)
    created = json.loads(out)[0]["created_at"]
    row = json.loads(out)[0]
    assert row == {
        "user": "bob",
        "blocks": 1,
        "created_at": created,
        "display_name": None,
        "metadata": {},
        "sessions": 1,
        "last_activity": row["last_activity"],
        "retention": "default",
    }


def test_list_says_how_many_more_blocks_follow(env: dict[str, str]) -> None:
    """`memlane list` shows --limit blocks (100 by default); when more follow, stderr says how many and where
    the next page starts, and stdout (a JSON list with --json) holds the blocks alone."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"} for i in range(250)]
    assert run(["add", "carol", "--session", "s1"], env, json.dumps(messages))[0] == 0  # 125 exchanges, 250 blocks
    code, out, err = run(["list", "carol"], env)
    assert code == 0 and len(out.splitlines()) == 100
    assert err.strip() == "... 150 more blocks (250 in all); use --limit/--offset: the next page is --offset 100"
    code, out, err = run(["list", "carol", "--json", "--offset", "200"], env)
    assert code == 0 and len(json.loads(out)) == 50 and err == ""  # the last page: nothing more to say
    code, out, err = run(["list", "carol", "--json", "--limit", "40", "--offset", "200"], env)
    assert len(json.loads(out)) == 40 and "10 more blocks (250 in all)" in err and "--offset 240" in err
    code, out, err = run(["list", "carol", "--session", "other"], env)
    assert code == 0 and out == "" and err == ""


def test_bench_perf_json_keys(tmp_path: Path) -> None:
    env = {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_PERF_SIZES": "200,500", "MEMLANE_ANN_THRESHOLD": "300"}
    code, out, _ = run(["bench", "perf", "--json", "--queries", "5", "--out", str(tmp_path / "perf")], env)
    assert code == 0, out
    figures = json.loads(out)
    for key in ("ingest_p50_ms", "ingest_p95_ms", "bulk_blocks_per_s", "embedder_sentences_per_s",
                "search_p50_ms_200", "vector_p50_ms_200", "keyword_p50_ms_500", "embed_p50_ms_500",
                "vector_exact_p50_ms_500", "ingest_p50_ms_500", "search_after_add_p50_ms_500", "ann_build_s_500",
                "calibration_embed_ms_p50",
                "search_p50_ms_500_x_cal", "store_mb", "peak_rss_mb"):  # fmt: skip
        assert key in figures and figures[key] > 0, key
    assert "ann_build_s_200" not in figures  # below the threshold: exact, no index
    assert figures["ann_recall10_200"] == 1.0 and 0.5 <= figures["ann_recall10_500"] <= 1.0
    assert (tmp_path / "perf" / "perf-curve.png").stat().st_size > 0
    assert json.loads((tmp_path / "perf" / "perf.json").read_text())["engine"] == "sqlite"


def test_extraction_commands(env: dict[str, str]) -> None:
    env = {**env, "MEMLANE_LLM": "scripted"}
    code, out, _ = run(["add", "alice", "--extract", "async", "--json"], env, json.dumps(MESSAGES))
    assert code == 0 and json.loads(out)["jobs_enqueued"] == 2
    code, out, _ = run(["queue", "status", "--json"], env)
    status = json.loads(out)
    assert (status["queued"], status["running"], status["done"], status["dead"]) == (2, 0, 0, 0)
    code, out, _ = run(["worker", "--drain", "--concurrency", "2", "--poll", "0.01"], env)
    assert code == 0, out
    assert json.loads(out.strip().splitlines()[-1])["done"] == 2
    code, out, _ = run(["search", "alice", "Ana Lisbon", "--json"], env)
    hit = json.loads(out)[0]
    assert hit["summary"] and hit["facts"] and hit["extraction_status"] == "done"
    code, out, _ = run(["llm", "log", "--json", "-n", "10"], env)
    calls = json.loads(out)
    assert len(calls) == 2 and {c["purpose"] for c in calls} == {"extract"} and calls[0]["namespace"] == "alice"
    code, out, _ = run(
        ["add", "bob", "--extract", "sync", "--perspective", "single", "--json"], env, json.dumps(MESSAGES)
    )
    assert code == 0
    code, out, _ = run(["list", "bob", "--json"], env)
    assert json.loads(out)[0]["extraction_status"] == "done"


def test_compact_rewrites_the_store_and_refuses_what_it_cannot(env: dict[str, str], tmp_path: Path) -> None:
    assert run(["add", "alice", "--json"], env, json.dumps(MESSAGES))[0] == 0
    code, out, _ = run(["compact"], env)
    assert code == 0 and "KiB pages" in out and "cli.db" in out
    code, out, _ = run(["search", "alice", "where does Ana live", "--json"], env)
    assert code == 0 and "Lisbon" in json.loads(out)[0]["message"]
    code, _, err = run(["compact", "--store", str(tmp_path / "missing.db")], env)
    assert code == 3 and "no store at" in err and not (tmp_path / "missing.db").exists()
