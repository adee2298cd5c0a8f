"""Numbers no query can take: 2**63 and beyond, -2**63 - 1, 2**64, 1e308, NaN, sent to every number a caller
gives memlane (prompt versions, k, limits, offsets, TTLs, times as epoch seconds, counts, job ids, a
worker's concurrency and lease), through every interface: the HTTP service (/v1 and the Agent Memory API),
the MCP tools, the CLI and the Python API. SQLite's integers are 64-bit, so 2**63 reaching a query was a
500 and a traceback; every one is now refused where it enters (4xx, a tool error, exit 2 naming the
option, a ValidationError naming the field), and nothing stored changes.

The tables below name a valid request for each operation that takes a number; each test checks that the
table covers every number the interface takes (its OpenAPI spec, its tools' schemas, its commands'
options, the Memory's methods), so a number added later without a bound fails here."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import click
import httpx
import pytest
from http_support import ADMIN_KEY, Service, make_service
from redteam_support import cli, run_cli

from mcp import Client
from memlane.core.errors import ConfigError, NotFoundError, ValidationError
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.memory_model import PromptRegistry
from memlane.core.model import Filters
from memlane.core.retention import RetentionPolicy
from memlane.interfaces.http.agent_memory import serves
from memlane.interfaces.mcp import build_server

BIG = [2**63, -(2**63) - 1, 2**64, 10**30]
NUMBERS: list[Any] = [*BIG, 1e308, -1e308, float("nan"), float("inf")]
AS_TEXT = ["9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e308", "NaN", "inf"]
T = 1_700_000_000  # a valid time as epoch seconds
TIME_FIELDS = {"time", "before", "after", "at", "since", "started_at", "ingested_after", "ingested_before"}


# -- what is stored: one fingerprint of every table a write could touch --------------------------------------

TABLES = ("users", "blocks", "search_keys", "sessions", "prompts", "prompt_versions", "jobs", "api_keys", "meta")


def fingerprint(memory: Memory) -> str:
    store: Any = memory.store
    digest = hashlib.sha256()
    for table in TABLES:
        for row in store.query(f"SELECT * FROM {table} ORDER BY 1"):
            digest.update(repr(row).encode())
    policies = store.query("SELECT * FROM retention_policies ORDER BY 1")
    digest.update(repr(policies).encode())
    return digest.hexdigest()


def seed(memory: Memory) -> dict[str, str]:
    """Prompts, alice with a block and a session: what the requests below refer to (each prompt that a
    request archives or deletes is its own)."""
    for prompt in ("p", "gone", "shelved", "stored", "dropped"):
        memory.prompts.create(prompt, "Be brief.")
    memory.create_user("alice")
    block = memory.add_facts("alice", ["Alice likes tea."], session_id="s1").block_ids[0]
    memory.create_session("alice", "closing")
    return {"block": block}


# -- HTTP ------------------------------------------------------------------------------------------------

SEARCH = {
    "query": "tea",
    "k": 5,
    "before": T + 10,
    "after": 0,
    "at": T,
    "ingested_after": 0,
    "ingested_before": 4 * T,
    "prompt_id": "p",
    "prompt_version": 0,
}
# (method, path, who, query, body): a request each operation accepts; every number it takes set to a valid
# value, so that replacing one of them changes nothing else. "{block}" is alice's block.
HTTP: list[tuple[str, str, str, dict[str, Any], dict[str, Any] | None]] = [
    ("GET", "/v1/users", "admin", {"limit": 10, "offset": 0}, None),
    (
        "POST",
        "/v1/memories",
        "alice",
        {},
        {
            "messages": [{"role": "user", "content": "hello", "time": T}],
            "time": T,
            "ttl_s": 60,
            "prompt": {"prompt_id": "p", "version": 0},
        },
    ),
    ("GET", "/v1/memories", "alice", {"limit": 10, "offset": 0}, None),
    (
        "POST",
        "/v1/facts",
        "alice",
        {},
        {"facts": ["x"], "time": T, "ttl_s": 60, "prompt": {"prompt_id": "p", "version": 0}},
    ),
    (
        "POST",
        "/v1/exchanges",
        "alice",
        {},
        {
            "exchanges": [{"user_content": "q", "assistant_content": "a"}],
            "time": T,
            "ttl_s": 60,
            "prompt": {"prompt_id": "p", "version": 0},
        },
    ),
    (
        "POST",
        "/v1/search",
        "alice",
        {},
        SEARCH,
    ),
    (
        "POST",
        "/v1/browse",
        "alice",
        {},
        {
            "limit": 10,
            "offset": 0,
            "before": T + 10,
            "after": 0,
            "ingested_after": 0,
            "ingested_before": 4 * T,
            "prompt_id": "p",
            "prompt_version": 0,
        },
    ),
    ("POST", "/v1/memories/ttl", "alice", {}, {"ttl_s": 60}),
    (
        "PUT",
        "/v1/memories/{block}",
        "alice",
        {},
        {"content": "y", "ttl_s": 60, "prompt": {"prompt_id": "p", "version": 0}},
    ),
    ("PATCH", "/v1/memories/{block}", "alice", {}, {"ttl_s": 60, "prompt": {"prompt_id": "p", "version": 0}}),
    ("POST", "/v1/queue/retry", "admin", {}, {"since": T}),
    ("POST", "/v1/sessions", "alice", {}, {"session_id": "s2", "started_at": T, "default_ttl_s": 60}),
    ("GET", "/v1/sessions", "alice", {"limit": 10, "offset": 0}, None),
    ("PATCH", "/v1/sessions/s1", "alice", {}, {"default_ttl_s": 60}),
    ("POST", "/v1/sessions/closing/end", "alice", {}, {"at": T + 10}),
    ("GET", "/v1/prompts", "admin", {"limit": 10, "offset": 0}, None),
    ("DELETE", "/v1/prompts/gone", "admin", {"version": 0}, None),
    ("GET", "/v1/prompts/p/versions", "admin", {"limit": 10, "offset": 0}, None),
    ("GET", "/v1/prompts/p/versions/{version}", "admin", {}, None),
    ("POST", "/v1/prompts/shelved/archive", "admin", {}, {"version": 0}),
    ("PUT", "/v1/retention/default", "admin", {}, {"max_age_days": 30, "max_blocks": 10}),
    ("PUT", "/v1/users/alice/retention", "admin", {}, {"max_age_days": 30, "max_blocks": 10}),
    ("POST", "/v1/retention/apply", "admin", {}, {"at": T, "dry_run": True}),
    ("GET", "/v1/users/alice/memories", "admin", {"limit": 10, "offset": 0}, None),
    (
        "POST",
        "/v1/users/alice/search",
        "admin",
        {},
        SEARCH,
    ),
    ("GET", "/v1/users/alice/sessions", "admin", {"limit": 10, "offset": 0}, None),
    ("GET", "/v1/llm", "admin", {"timeout_s": 1}, None),
    # The Agent Memory API (its SDK's routes).
    ("GET", "/users", "admin", {"limit": 10, "offset": 0}, None),
    ("PUT", "/users/alice/ttl", "alice", {}, {"new_ttl": 60}),
    ("POST", "/users/alice/sessions", "alice", {}, {"session_id": "s3", "memory_blocks_ttl": 60}),
    ("GET", "/users/alice/sessions", "alice", {"limit": 10, "offset": 0}, None),
    (
        "POST",
        "/users/alice/sessions/s1/memory",
        "alice",
        {},
        {"facts": ["x"], "memory_block_ttl": 60, "prompt_id": "p", "prompt_vid": 0},
    ),
    (
        "PUT",
        "/users/alice/sessions/s1/memory/{block}",
        "alice",
        {},
        {"fact": "y", "memory_block_ttl": 60, "prompt_id": "p", "prompt_vid": 0},
    ),
    (
        "POST",
        "/users/alice/sessions/s1/memory/search",
        "alice",
        {},
        {"query": "tea", "filters": {"relevant_k": 5, "prompt_id": "p", "prompt_vid": 0}},
    ),
    ("GET", "/users/alice/memory", "alice", {"limit": 10, "offset": 0}, None),
    ("GET", "/prompts", "admin", {"limit": 10, "offset": 0}, None),
    ("GET", "/prompts/p/versions", "admin", {"limit": 10, "offset": 0}, None),
    # Numbers the spec shows as text (``vid``: a version or "all").
    ("GET", "/prompts/p", "admin", {"vid": 0}, None),
    ("PUT", "/prompts/stored/archive", "admin", {"vid": 0}, None),
    ("DELETE", "/prompts/dropped", "admin", {"vid": 0}, None),
]
PATH_NUMBERS = {"/v1/prompts/p/versions/{version}": {"version": 0}}
TEXT_NUMBERS = {("GET", "/prompts/p"), ("PUT", "/prompts/stored/archive"), ("DELETE", "/prompts/dropped")}
# The Agent Memory API serves a limit above its maximum as the maximum (its SDK's contract): bounded, not refused.
CLAMPED = "query:limit"


def numbers_in(schema: dict[str, Any], components: dict[str, Any], where: str) -> Iterator[str]:
    """The places (``body.a.b``, ``body.list[].c``) where ``schema`` takes an integer or a number."""
    if "$ref" in schema:
        schema = components[schema["$ref"].split("/")[-1]]
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from numbers_in(sub, components, where)
    if schema.get("type") in ("integer", "number"):
        yield where
    for name, sub in schema.get("properties", {}).items():
        yield from numbers_in(sub, components, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from numbers_in(schema["items"], components, f"{where}[]")


def spec_numbers(app: Any) -> set[tuple[str, str, str]]:
    spec = app.openapi()
    components = spec["components"]["schemas"]
    found: set[tuple[str, str, str]] = set()
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            places: set[str] = set()
            for param in op.get("parameters", []):
                places |= set(numbers_in(param.get("schema", {}), components, f"{param['in']}:{param['name']}"))
            for content in op.get("requestBody", {}).get("content", {}).values():
                places |= set(numbers_in(content["schema"], components, "body"))
            found |= {(method.upper(), path, p) for p in places}
    return found


def route_of(path: str) -> str:
    """The spec's path of a request path of the table."""
    for pattern, route in (
        (r"^/v1/users/alice", "/v1/users/{user}"),
        (r"^/users/alice", "/users/{user_id}"),
        (r"/prompts/[^/]+", "/prompts/{prompt_id}"),
        (r"/sessions/[^/]+", "/sessions/{session_id}"),
        (r"\{block\}", "{block_id}"),
    ):
        path = re.sub(pattern, route, path)
    return path


def places_of(query: dict[str, Any], body: Any, path: str) -> list[str]:
    out = [f"query:{k}" for k, v in query.items() if isinstance(v, int | float)]
    out += [f"path:{k}" for k in PATH_NUMBERS.get(path, {})]

    def walk(value: Any, where: str) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            out.append(where)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{where}.{k}")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            walk(value[0], f"{where}[]")

    if body is not None:
        walk(body, "body")
    return out


def with_value(query: dict[str, Any], body: Any, path: str, place: str, value: Any) -> tuple[dict[str, Any], Any, str]:
    query, body = dict(query), json.loads(json.dumps(body))
    kind, _, name = place.partition(":")
    if kind == "query":
        query[name] = value
    elif kind == "path":
        path = path.replace("{" + name + "}", str(value))
    else:
        node = body
        steps = place.split(".")[1:]
        for step in steps[:-1]:
            node = node[step[:-2]][0] if step.endswith("[]") else node[step]
        node[steps[-1]] = value
    return query, body, path


def send(
    svc: Service,
    keys: dict[str, str],
    ids: dict[str, str],
    method: str,
    path: str,
    who: str,
    query: dict[str, Any],
    body: Any,
) -> httpx.Response:
    path = path.replace("{block}", ids["block"])
    for name, value in PATH_NUMBERS.get(path, {}).items():
        path = path.replace("{" + name + "}", str(value))
    content = None if body is None else json.dumps(body).encode()  # NaN as JSON's NaN token: not JSON
    headers = {"Authorization": f"Bearer {keys[who]}", "Content-Type": "application/json"}
    with svc.client() as client:
        return client.request(method, path, params=query, content=content, headers=headers)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[tuple[Service, dict[str, str], dict[str, str]]]:
    svc = make_service(tmp_path)
    ids = seed(svc.memory)
    keys = {"admin": ADMIN_KEY, "alice": svc.admin.post("/v1/users/alice/keys", json={"role": "admin"}).json()["key"]}
    yield svc, keys, ids
    svc.close()


def test_the_http_table_covers_every_number_of_the_api(http: tuple[Service, dict[str, str], dict[str, str]]) -> None:
    svc, _, _ = http
    covered = {
        (method, route_of(path), place)
        for method, path, _, query, body in HTTP
        for place in places_of(query, body, path)
        if (method, path) not in TEXT_NUMBERS
    }
    missing = spec_numbers(svc.app) - covered
    assert not missing, f"numbers the API takes that no request of HTTP sets: {sorted(missing)}"


def test_each_http_request_of_the_table_is_accepted(tmp_path: Path) -> None:
    """The requests are valid as they are (on a store of their own), so a refusal below is the number's."""
    svc = make_service(tmp_path, "scratch")
    try:
        ids = seed(svc.memory)
        keys = {
            "admin": ADMIN_KEY,
            "alice": svc.admin.post("/v1/users/alice/keys", json={"role": "admin"}).json()["key"],
        }
        for method, path, who, query, body in HTTP:
            resp = send(svc, keys, ids, method, path, who, query, body)
            assert resp.status_code < 300, (method, path, resp.text)
    finally:
        svc.close()


def test_no_number_reaches_a_query_over_http(http: tuple[Service, dict[str, str], dict[str, str]]) -> None:
    svc, keys, ids = http
    before = fingerprint(svc.memory)
    answered: list[str] = []
    for method, path, who, query, body in HTTP:
        for place in places_of(query, body, path):
            values = AS_TEXT if place.startswith(("query:", "path:")) else NUMBERS
            for value in values:
                q, b, p = with_value(query, body, path, place, value)
                resp = send(svc, keys, ids, method, p, who, q, b)
                clamped = place == CLAMPED and serves(route_of(path)) and resp.status_code == 200
                if clamped:
                    assert resp.json()["limit"] <= 1000, resp.text
                elif not 400 <= resp.status_code < 500:
                    answered.append(f"{method} {path} {place}={value!r}: {resp.status_code} {resp.text[:200]}")
                assert fingerprint(svc.memory) == before, f"{method} {path} {place}={value!r} changed the store"
    assert not answered, "\n".join(answered)


# -- MCP -------------------------------------------------------------------------------------------------

# What a JSON number can be: the SDK's client sends NaN and infinities as null (the argument's default).
JSON_NUMBERS = [v for v in NUMBERS if math.isfinite(v)]
MCP: dict[str, dict[str, Any]] = {
    "add_memory": {"messages": [{"role": "user", "content": "hi", "time": T}], "time": T, "ttl_s": 60},
    "add_fact": {"facts": ["x"], "time": T, "ttl_s": 60},
    "search_memory": {"query": "tea", "k": 5, "before": T + 10, "after": 0, "at": T},
    "list_memories": {"limit": 10, "offset": 0},
    "update_memory": {"block_id": "{block}", "content": "y", "ttl_s": 60},
}


def test_no_number_reaches_a_query_over_mcp(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing")
    ids = seed(mem)
    scratch = Memory.open(tmp_path / "scratch.db", embedder="hashing")
    scratch_ids = seed(scratch)

    async def valid() -> None:  # each call of the table is accepted as it is (on a store of its own)
        async with Client(build_server(scratch, user="alice")) as client:
            for name, args in MCP.items():
                res = await client.call_tool(
                    name, json.loads(json.dumps(args).replace("{block}", scratch_ids["block"]))
                )
                assert not res.is_error, (name, res.content)

    anyio.run(valid)
    scratch.close()
    before = fingerprint(mem)

    async def main() -> list[str]:
        wrong: list[str] = []
        async with Client(build_server(mem, user="alice")) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            places = {
                (name, p) for name, schema in tools.items() for p in numbers_in(schema, schema.get("$defs", {}), "args")
            }
            covered = {(name, p) for name, args in MCP.items() for p in places_of({}, args, "") if p.startswith("body")}
            covered = {(n, "args" + p.removeprefix("body")) for n, p in covered}
            assert places == covered, f"numbers the tools take that MCP does not set: {sorted(places - covered)}"
            for name, args in MCP.items():
                args = json.loads(json.dumps(args).replace("{block}", ids["block"]))
                for place in places_of({}, args, ""):
                    for value in JSON_NUMBERS:
                        _, bad, _ = with_value({}, args, "", place, value)
                        res = await client.call_tool(name, bad)
                        if not res.is_error:
                            wrong.append(f"{name} {place}={value!r} succeeded")
        return wrong

    try:
        wrong = anyio.run(main)
        assert not wrong, "\n".join(wrong)
        assert fingerprint(mem) == before
    finally:
        mem.close()


# -- CLI -------------------------------------------------------------------------------------------------

# Numeric options that are not bounded on both sides, and why.
UNBOUNDED_OPTIONS = {
    # An index into the store's list of shards, checked against it before anything else runs.
    ("shards move", "--to"),
    # Checked by RetentionPolicy (memlane.core.retention) before anything runs, the message naming the option.
    ("retention set", "--max-age-days"),
    ("retention set", "--max-blocks"),
}


def numeric_options() -> Iterator[tuple[str, click.Parameter]]:
    def walk(cmd: click.Command, name: str) -> Iterator[tuple[str, click.Parameter]]:
        if isinstance(cmd, click.Group):
            for sub_name, sub in cmd.commands.items():
                yield from walk(sub, f"{name} {sub_name}".strip())
            return
        for param in cmd.params:
            if isinstance(param.type, click.types.IntParamType | click.types.FloatParamType):
                yield name, param

    yield from walk(cli, "")


def test_every_numeric_option_outside_the_bench_is_bounded() -> None:
    """A value out of range is refused by click, naming the option, before a command runs."""
    loose = []
    for command, param in numeric_options():
        if command.startswith("bench ") or (command, param.opts[0]) in UNBOUNDED_OPTIONS:
            continue
        kind = param.type
        bounded = isinstance(kind, click.IntRange | click.FloatRange) and kind.min is not None and kind.max is not None
        if not bounded:
            loose.append(f"memlane {command} {param.opts[0]}: {kind}")
    assert not loose, "numeric options without both bounds (memlane.interfaces.cli.options has them):\n" + "\n".join(
        loose
    )


# (command, arguments, option): a command that reaches the store, with "N" where the number goes.
CLI: list[tuple[str, list[str], str]] = [
    ("search", ["search", "alice", "tea", "-k", "N"], "-k"),
    ("list", ["list", "alice", "--limit", "N"], "--limit"),
    ("list", ["list", "alice", "--offset", "N"], "--offset"),
    ("add-fact", ["add-fact", "alice", "x", "--ttl", "N"], "--ttl"),
    ("add-fact", ["add-fact", "alice", "x", "--prompt", "p@N"], "--prompt"),
    ("update", ["update", "alice", "{block}", "--content", "y", "--ttl", "N"], "--ttl"),
    ("update", ["update", "alice", "{block}", "--prompt", "p@N"], "--prompt"),
    ("ttl", ["ttl", "alice", "N"], "SECONDS"),
    ("session create", ["session", "create", "alice", "s2", "--ttl", "N"], "--ttl"),
    ("session update", ["session", "update", "alice", "s1", "--ttl", "N"], "--ttl"),
    ("session list", ["session", "list", "alice", "--limit", "N"], "--limit"),
    ("session list", ["session", "list", "alice", "--offset", "N"], "--offset"),
    ("prompt list", ["prompt", "list", "--limit", "N"], "--limit"),
    ("prompt list", ["prompt", "list", "--offset", "N"], "--offset"),
    ("prompt show", ["prompt", "show", "p", "--version", "N"], "--version"),
    ("prompt archive", ["prompt", "archive", "p", "--version", "N"], "--version"),
    ("prompt purge", ["prompt", "purge", "p", "--version", "N"], "--version"),
    ("llm log", ["llm", "log", "-n", "N"], "-n"),
    ("retention set", ["retention", "set", "--max-age-days", "N"], "--max-age-days"),
    ("retention set", ["retention", "set", "--max-blocks", "N"], "--max-blocks"),
    ("worker", ["worker", "--llm", "scripted", "--drain", "--concurrency", "N"], "--concurrency"),
    ("worker", ["worker", "--llm", "scripted", "--drain", "--lease", "N"], "--lease"),
    ("worker", ["worker", "--llm", "scripted", "--drain", "--poll", "N"], "--poll"),
    ("worker", ["worker", "--llm", "scripted", "--drain", "--retention-every", "N"], "--retention-every"),
]
# Commands whose numbers no store query takes: a server's port, guards and intervals, the bench's own runs.
NO_STORE_NUMBERS = ("bench ", "serve", "mcp", "shards move")


@pytest.fixture
def cli_env(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    env = {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}
    mem = Memory.open(tmp_path / "cli.db", embedder="hashing")
    try:
        ids = seed(mem)
    finally:
        mem.close()
    return env, ids


def test_the_cli_table_covers_every_option_that_reaches_a_store() -> None:
    wanted = {
        (command, param.opts[0] if isinstance(param, click.Option) else param.name.upper())  # type: ignore[union-attr]
        for command, param in numeric_options()
        if not command.startswith(NO_STORE_NUMBERS)
    }
    missing = wanted - {(command, option) for command, _, option in CLI}
    assert not missing, f"numeric options that CLI does not try: {sorted(missing)}"


@pytest.mark.parametrize(("command", "args", "option"), CLI, ids=[f"{c} {o}" for c, _, o in CLI])
def test_no_number_reaches_a_query_from_the_cli(
    cli_env: tuple[dict[str, str], dict[str, str]], command: str, args: list[str], option: str
) -> None:
    env, ids = cli_env
    store = Path(env["MEMLANE_STORE"])
    mem = Memory.open(store, embedder="hashing")
    before = fingerprint(mem)
    mem.close()
    for text in AS_TEXT:
        argv = [a.replace("{block}", ids["block"]).replace("N", text) for a in args]
        res = run_cli(argv, env)
        assert res.exit_code == 2, (argv, res.exit_code, res.output, res.exception)
        assert "Traceback" not in res.output and option in res.stderr, (argv, res.stderr)
        mem = Memory.open(store, embedder="hashing")
        try:
            assert fingerprint(mem) == before, argv
        finally:
            mem.close()


# -- the Python API ----------------------------------------------------------------------------------------

# Each public method of Memory and of its prompt registry that takes a number, and a call that puts one
# value in each number it takes (None: it takes none that reaches a store, and why).
PYTHON: dict[str, Callable[[Memory, dict[str, str], Any], object] | str] = {
    "add.ttl_s": lambda m, ids, v: m.add("alice", [{"role": "user", "content": "x"}], ttl_s=v),
    "add.time": lambda m, ids, v: m.add("alice", [{"role": "user", "content": "x"}], time=v),
    "add.prompt": lambda m, ids, v: m.add("alice", [{"role": "user", "content": "x"}], prompt=("p", v)),
    "add.epoch": lambda m, ids, v: m.add("alice", [{"role": "user", "content": "x"}], epoch=v),
    "add_many.epoch": lambda m, ids, v: m.add_many([], epoch=v),
    "add_facts.ttl_s": lambda m, ids, v: m.add_facts("alice", ["x"], ttl_s=v),
    "add_facts.time": lambda m, ids, v: m.add_facts("alice", ["x"], time=v),
    "add_facts.prompt": lambda m, ids, v: m.add_facts("alice", ["x"], prompt=("p", v)),
    "add_exchanges.ttl_s": lambda m, ids, v: m.add_exchanges("alice", [("q", "a")], ttl_s=v),
    "add_exchanges.time": lambda m, ids, v: m.add_exchanges("alice", [("q", "a")], time=v),
    "add_exchanges.prompt": lambda m, ids, v: m.add_exchanges("alice", [("q", "a")], prompt=("p", v)),
    "search.k": lambda m, ids, v: m.search("alice", "tea", k=v),
    "search.before": lambda m, ids, v: m.search("alice", "tea", before=v),
    "search.after": lambda m, ids, v: m.search("alice", "tea", after=v),
    "search.at": lambda m, ids, v: m.search("alice", "tea", at=v),
    "search.filters": lambda m, ids, v: m.search("alice", "tea", filters=Filters(prompt_id="p", prompt_version=v)),
    "get_memory.k": lambda m, ids, v: m.get_memory("alice", "tea", k=v),
    "get_memory.before": lambda m, ids, v: m.get_memory("alice", "tea", before=v),
    "get_memory.after": lambda m, ids, v: m.get_memory("alice", "tea", after=v),
    "get_memory.at": lambda m, ids, v: m.get_memory("alice", "tea", at=v),
    "browse.limit": lambda m, ids, v: m.browse("alice", limit=v),
    "browse.offset": lambda m, ids, v: m.browse("alice", offset=v),
    "browse.before": lambda m, ids, v: m.browse("alice", before=v),
    "browse.after": lambda m, ids, v: m.browse("alice", after=v),
    "browse.filters": lambda m, ids, v: m.browse("alice", Filters(prompt_id="p", prompt_version=v)),
    "list.limit": lambda m, ids, v: m.list("alice", limit=v),
    "list.offset": lambda m, ids, v: m.list("alice", offset=v),
    "list_sessions.limit": lambda m, ids, v: m.list_sessions("alice", limit=v),
    "list_sessions.offset": lambda m, ids, v: m.list_sessions("alice", offset=v),
    "list_users.limit": lambda m, ids, v: m.list_users(limit=v),
    "list_users.offset": lambda m, ids, v: m.list_users(offset=v),
    "create_session.started_at": lambda m, ids, v: m.create_session("alice", "s2", started_at=v),
    "create_session.default_ttl_s": lambda m, ids, v: m.create_session("alice", "s2", default_ttl_s=v),
    "update_session.default_ttl_s": lambda m, ids, v: m.update_session("alice", "s1", default_ttl_s=v),
    "end_session.at": lambda m, ids, v: m.end_session("alice", "s1", at=v),
    "set_ttl.ttl_s": lambda m, ids, v: m.set_ttl("alice", v),
    "update.ttl_s": lambda m, ids, v: m.update("alice", ids["block"], ttl_s=v),
    "update.prompt": lambda m, ids, v: m.update("alice", ids["block"], prompt=("p", v)),
    "set_retention.policy": lambda m, ids, v: m.set_retention(None, RetentionPolicy(max_age_days=v)),
    "apply_retention.now": lambda m, ids, v: m.apply_retention(now=v),
    "requeue.since": lambda m, ids, v: m.requeue(since=v),
    "queue_status.recent_errors": lambda m, ids, v: m.queue_status(recent_errors=v),
    "run_jobs.job_ids": lambda m, ids, v: m.run_jobs([v]),
    "run_jobs.retry_pause_s": lambda m, ids, v: m.run_jobs([], retry_pause_s=v),
    "run_jobs.timeout_s": lambda m, ids, v: m.run_jobs([], timeout_s=v),
    "add_facts.sync_timeout_s": lambda m, ids, v: m.add_facts("alice", ["x"], extract="sync", sync_timeout_s=v),
    "add_exchanges.sync_timeout_s": (
        lambda m, ids, v: m.add_exchanges("alice", [("x", "y")], extract="sync", sync_timeout_s=v)
    ),
    "add_facts.max_tokens": lambda m, ids, v: m.add_facts("alice", ["x"], max_tokens=v),
    "add_facts.max_queued": lambda m, ids, v: m.add_facts("alice", ["x"], max_queued=v),
    "add_exchanges.max_tokens": lambda m, ids, v: m.add_exchanges("alice", [("q", "a")], max_tokens=v),
    "add_exchanges.max_queued": lambda m, ids, v: m.add_exchanges("alice", [("q", "a")], max_queued=v),
    "delete_blocks.filters": lambda m, ids, v: m.delete_blocks("alice", Filters(prompt_id="p", prompt_version=v)),
    "worker.concurrency": lambda m, ids, v: m.worker(concurrency=v),
    "worker.lease_s": lambda m, ids, v: m.worker(lease_s=v),
    "worker.poll_s": lambda m, ids, v: m.worker(poll_s=v),
    "worker.retention_every_s": lambda m, ids, v: m.worker(retention_every_s=v),
    "worker.retry_in": "a function the worker calls, not a number",
    "open_store.server_timeout_s": "how long to wait for a PostgreSQL server: a connection setting, no query",
    "open.server_timeout_s": "how long to wait for a PostgreSQL server: a connection setting, no query",
    "open.max_attempts": "a setting of the Memory made here; nothing stored yet",
    "open.default_ttl_s": "a setting of the Memory made here; nothing stored yet",
    "probe_write.timeout_s": "how long the probe waits for the write lock: no value is written",
    "PromptRegistry.version.version": lambda m, ids, v: m.prompts.version("p", v),
    "PromptRegistry.archive.version": lambda m, ids, v: m.prompts.archive("p", v),
    "PromptRegistry.purge.version": lambda m, ids, v: m.prompts.purge("p", v),
    "PromptRegistry.list.limit": lambda m, ids, v: m.prompts.list(limit=v),
    "PromptRegistry.list.offset": lambda m, ids, v: m.prompts.list(offset=v),
    "PromptRegistry.versions.limit": lambda m, ids, v: m.prompts.versions("p", limit=v),
    "PromptRegistry.versions.offset": lambda m, ids, v: m.prompts.versions("p", offset=v),
}
NUMERIC = ("int", "float", "datetime", "Policy", "Filters", "tuple[str, int")


def python_numbers() -> set[str]:
    """Every public method's parameter whose type takes a number."""
    out = set()
    for cls, prefix in ((Memory, ""), (PromptRegistry, "PromptRegistry.")):
        for name, fn in inspect.getmembers(cls, predicate=lambda f: inspect.isfunction(f) or inspect.ismethod(f)):
            if name.startswith("_"):
                continue
            for param in inspect.signature(fn).parameters.values():
                if any(t in str(param.annotation) for t in NUMERIC) and param.name != "self":
                    out.add(f"{prefix}{name}.{param.name}")
    return out


def test_the_python_table_covers_every_number_the_memory_takes() -> None:
    missing = python_numbers() - set(PYTHON)
    assert not missing, f"parameters that take a number and PYTHON does not call: {sorted(missing)}"


@pytest.mark.filterwarnings("ignore:Memory.get_memory is deprecated:DeprecationWarning")
def test_no_number_reaches_a_query_from_python(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "py.db", embedder="hashing", llm=ScriptedLLM())  # workers and jobs need one
    try:
        ids = seed(mem)
        before = fingerprint(mem)
        wrong = []
        for name, call in PYTHON.items():
            if isinstance(call, str):
                continue
            for value in NUMBERS:
                try:
                    call(mem, ids, value)
                except ValidationError:
                    pass
                except (NotFoundError, ConfigError) as exc:
                    wrong.append(f"{name}({value!r}): {type(exc).__name__} {exc}")
                except Exception as exc:  # an OverflowError from the database, a TypeError, ...
                    wrong.append(f"{name}({value!r}): {type(exc).__name__} {exc}")
                else:
                    wrong.append(f"{name}({value!r}) was accepted")
                assert fingerprint(mem) == before, f"{name}({value!r}) changed the store"
        assert not wrong, "\n".join(wrong)
    finally:
        mem.close()
