"""Bad bytes and bad JSON: the CLI exits 2 with one line that says where (file or stdin, line and column,
or the field), writes nothing; the HTTP service answers 4xx and the MCP server a tool error, never a 500
or a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_support import Service, make_service
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redteam_support import CLI, assert_clean_refusal, run_cli, store_content

from mcp import Client
from memlane.core.memory import Memory
from memlane.interfaces.mcp import build_server

GOOD = [{"role": "user", "content": "My sister Ana moved to Lisbon."}, {"role": "assistant", "content": "Nice."}]
DEEP = b"[" * 100_000 + b"]" * 100_000

BAD_STDIN: list[tuple[bytes, tuple[str, ...]]] = [
    (b'[{"role": "user", "content": "caf\xe9"}]', ("stdin", "not UTF-8", "byte e9 at line 1 column 34")),
    (b'[{"role": "user",\n "content": "\xff\xfe"}]', ("stdin", "not UTF-8", "line 2")),
    (b'[{"role": "user", "content": "half \\ud800 pair"}]', ("stdin", "messages[0].content", "surrogate")),
    (b'[{"role": "\\udfff", "content": "x"}]', ("stdin", "messages[0].role", "surrogate")),
    (b'[{"role": "user", "content": "x", "id": "\\ud83d"}]', ("stdin", "messages[0].id", "surrogate")),
    (DEEP, ("stdin", "nested deeper", "line 1")),
    (b'[{"role": "user", "content": "x", "id": ' + b"[" * 40 + b"]" * 40 + b"}]", ("stdin", "nested deeper")),
    (b'[{"role": "user", "content": "x", "time": NaN}]', ("stdin", "NaN")),
    (b'[{"role": "user", "content": "x", "time": -Infinity}]', ("stdin", "Infinity")),
    (b'[{"role": "user", "content": "x", "id": ' + b"7" * 5000 + b"}]", ("stdin", "digits")),
    (b'[{"role": "user", "content": "x", "id": 123456789012345678901234567890}]', ("stdin", "messages[0].id")),
    (b'[{"role": "user", "content": "x", "id": true}]', ("stdin", "messages[0].id")),
    (b"", ("stdin", "not JSON")),
    (b"\xef\xbb\xbf" + b"{}", ("stdin", "expected a JSON list")),
]
# Arguments as Python sees bytes that are not UTF-8 on a command line (surrogateescape): "\udcff".
BAD_ARGS: list[tuple[list[str], tuple[str, ...]]] = [
    (["search", "alice", "caf\udce9"], ("query", "surrogate")),
    (["search", "\udcff", "x"], ("user", "surrogate")),
    (["add", "\udcff"], ("user",)),
    (["add", "alice", "--session", "s\udcff"], ("session_id",)),
    (["add", "alice", "--conversation", "\udcff"], ("conversation_id",)),
    (["add", "alice", "--time", "\udcff"], ("time",)),
    (["list", "alice", "--session", "\udcff"], ("session_id",)),
    (["get", "alice", "\udcff"], ("block_id",)),
    (["delete-user", "\udcff"], ("user",)),
    (["search", "alice", "x", "--mode", "\udcff"], ("mode",)),
]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}
    assert run_cli(["add", "alice"], env, json.dumps(GOOD)).exit_code == 0
    return env


@pytest.mark.parametrize(("stdin", "where"), BAD_STDIN, ids=lambda v: repr(v)[:40])
def test_bad_stdin_is_exit_2_naming_where_and_writes_nothing(
    env: dict[str, str], stdin: bytes, where: tuple[str, ...]
) -> None:
    before = store_content(Path(env["MEMLANE_STORE"]))
    assert_clean_refusal(run_cli(["add", "alice"], env, stdin), *where)
    assert store_content(Path(env["MEMLANE_STORE"])) == before


def test_a_bad_file_is_named(env: dict[str, str], tmp_path: Path) -> None:
    f = tmp_path / "latin1.json"
    f.write_bytes('[{"role": "user", "content": "café"}]'.encode("latin-1"))
    assert_clean_refusal(run_cli(["add", "alice", "--file", str(f)], env), str(f), "not UTF-8", "line 1")
    f.write_bytes(b'[\n  {"role": "user", "content": "x"},\n  {"role": "user", "content": "\\ud800"}\n]')
    assert_clean_refusal(run_cli(["add", "alice", "--file", str(f)], env), str(f), "messages[1].content")


@pytest.mark.parametrize(("args", "where"), BAD_ARGS, ids=lambda v: repr(v)[:40])
def test_arguments_that_are_not_utf8_are_exit_2(env: dict[str, str], args: list[str], where: tuple[str, ...]) -> None:
    before = store_content(Path(env["MEMLANE_STORE"]))
    stdin = json.dumps(GOOD) if args[0] == "add" else None
    assert_clean_refusal(run_cli(args, env, stdin), *where)
    assert store_content(Path(env["MEMLANE_STORE"])) == before


def test_real_non_utf8_bytes_on_the_command_line(env: dict[str, str]) -> None:
    """The same through a real process: argv bytes decoded by Python itself, stderr as bytes."""
    full = {**os.environ, **env}
    for argv in ([b"search", b"alice", b"caf\xe9"], [b"add", b"al\xffice"]):
        proc = subprocess.run(
            [sys.executable.encode(), b"-c", CLI.encode(), *argv],
            input=json.dumps(GOOD).encode(),
            env=full,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert b"Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# -- the property: whatever the bytes and arguments, exit 0 or 2, no traceback, nothing written on 2 --------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(["\ud800", "\udcff"])
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "", "\udcff", "bob"]), "content": json_scalars},
    optional={"time": json_scalars, "id": json_scalars},
)
as_json = st.lists(message, max_size=3).map(lambda m: json.dumps(m).encode())
mangled = st.tuples(as_json, st.binary(max_size=4), st.integers(0, 100)).map(
    lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]
)
stdin_bytes = st.one_of(as_json, mangled, st.binary(max_size=64), st.integers(30, 3000).map(lambda n: b"[" * n))
argument = st.one_of(st.text(max_size=12), st.sampled_from(["\udcff", "a\ud800b", " ", "\u202e", "1e20"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stdin=stdin_bytes, user=argument, session=argument, time=st.one_of(st.none(), argument))
def test_any_input_exits_0_or_2_without_traceback(
    env: dict[str, str], stdin: bytes, user: str, session: str, time: str | None
) -> None:
    before = store_content(Path(env["MEMLANE_STORE"]))
    # "--option=value" and "--" keep an argument that starts with "-" an argument (else a click usage error).
    args = (
        ["add", f"--session={session or 's'}"]
        + ([f"--time={time}"] if time is not None else [])
        + ["--", user or "alice"]
    )
    res = run_cli(args, env, stdin)
    assert res.exit_code in (0, 2), (res.exit_code, res.stderr, res.exception)
    assert isinstance(res.exception, SystemExit) or res.exception is None, res.exception
    assert "Traceback" not in res.output
    if res.exit_code == 2:
        assert len(res.stderr.strip().splitlines()) == 1
        assert store_content(Path(env["MEMLANE_STORE"])) == before
    res = run_cli(["search", "--", user or "alice", session or "q"], env)
    assert res.exit_code in (0, 2) and isinstance(res.exception, SystemExit | None), res.exception


# -- the same bytes over HTTP and MCP ------------------------------------------------------------------------


@pytest.fixture
def http(tmp_path: Path) -> Any:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages": [{"role": "user", "content": "half \\ud800 pair"}]}',
        b'{"messages": [{"role": "user", "content": "x"}], "session_id": "\\udfff"}',
        b'{"messages": [{"role": "user", "content": "x", "id": "\\ud83d"}]}',
        b'{"messages": ' + DEEP + b"}",
        b'{"messages": [{"role": "user", "content": "x", "time": ' + b"[" * 900 + b"]" * 900 + b"}]}",
        b'{"messages": [{"role": "user", "content": "caf\xe9"}]}',
        b'{"messages": [{"role": "user", "content": "x", "time": NaN}]}',
        b'{"messages": [{"role": "user", "content": "x", "id": ' + b"7" * 5000 + b"}]}",
    ],
    ids=lambda b: repr(b)[:40],
)
def test_http_answers_4xx_to_bad_bytes(http: Service, body: bytes) -> None:
    client = http.client(http.new_user("alice"))
    resp = client.post("/v1/memories", content=body, headers={"content-type": "application/json"})
    assert 400 <= resp.status_code < 500, resp.text
    resp = client.post(
        "/v1/search", content=body.replace(b'"messages"', b'"query"'), headers={"content-type": "application/json"}
    )
    assert 400 <= resp.status_code < 500, resp.text
    assert client.get("/v1/memories").json() == []


def test_mcp_answers_a_tool_error_to_lone_surrogates(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing")

    async def main() -> None:
        async with Client(build_server(mem, user="alice")) as client:
            for name, args in (
                ("add_memory", {"messages": [{"role": "user", "content": "half \ud800 pair"}]}),
                ("add_memory", {"messages": GOOD, "session_id": "\udfff"}),
                ("search_memory", {"query": "caf\udce9"}),
                ("list_memories", {"session_id": "\ud800"}),
                ("delete_memory", {"block_id": "\ud800"}),
            ):
                res = await client.call_tool(name, args)
                assert res.is_error, (name, res)

    try:
        anyio.run(main)
        assert mem.users() == []
    finally:
        mem.close()
