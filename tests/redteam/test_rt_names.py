"""Names that render differently from what they are (DEL, U+0085, a right-to-left override, zero-width
characters, spaces at the ends, a decomposed accent) are refused by one rule, the core's, at every
interface; names stored before the rule stay readable and deletable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from http_support import Service, make_service
from hypothesis import given
from hypothesis import strategies as st
from redteam_support import assert_clean_refusal, run_cli, store_content

import memlane.core.ingest as ingest_module
from mcp import Client
from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.names import check_label, check_name, check_stored_name, shown
from memlane.interfaces.mcp import build_server

LOOK_ALIKES = {
    "del": "bob\x7f",
    "nel": "bob\u0085",
    "rlo": "bob\u202egnp.exe",
    "zwsp": "b\u200bob",
    "zwj": "bo\u200db",
    "bom": "\ufeffbob",
    "soft hyphen": "bo\u00adb",
    "nbsp": "bob\u00a0smith",
    "ideographic space": "bob\u3000",
    "line separator": "bob\u2028",
    "trailing space": "bob ",
    "leading space": " bob",
    "tab": "bob\tsmith",
    "decomposed": "Jose\u0301",  # NFD of "José"
    "private use": "bob\ue000",
    "unassigned": "bob\U000e0080",
    "surrogate": "bob\udcff",
}
GOOD_NAMES = ["alice", "José", "李雷", "Ana María", "o'brien-2", "user@example.com", "🙂", "a" * 256]
MESSAGES = [{"role": "user", "content": "I keep bees."}, {"role": "assistant", "content": "Sweet."}]


@pytest.mark.parametrize("name", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_the_rule_refuses_look_alikes(name: str) -> None:
    with pytest.raises(ValidationError) as err:
        check_name(name, "user")
    assert err.value.where == "user"


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_the_rule_takes_printable_nfc_names(name: str) -> None:
    assert check_name(name, "user") == name and shown(name) == name


@given(st.text(min_size=1, max_size=20))
def test_a_name_the_rule_takes_is_shown_as_itself(name: str) -> None:
    try:
        check_label(name, "label")  # the rule's printable part: what a terminal needs ('/' is printable)
    except ValidationError:
        assert shown(name) == ascii(name)  # escaped: what it is, whatever it renders as
        with pytest.raises(ValidationError):
            check_name(name, "user")
        return
    assert name.isprintable() and name == name.strip() and shown(name) == name


def test_the_python_api_applies_it_to_every_name(memory: Memory) -> None:
    for field, kwargs in (("user", {}), ("conversation_id", {}), ("session_id", {})):
        for name in (LOOK_ALIKES["rlo"], LOOK_ALIKES["trailing space"], LOOK_ALIKES["decomposed"]):
            user = name if field == "user" else "alice"
            extra: dict[str, Any] = {} if field == "user" else {field: name}
            with pytest.raises(ValidationError) as err:
                memory.add(user, MESSAGES, **kwargs, **extra)
            assert err.value.where == field
    with pytest.raises(ValidationError):
        memory.create_user(LOOK_ALIKES["zwsp"])
    assert memory.users() == []
    with pytest.raises(ValidationError):
        check_label("laptop\u202e", "label")


def test_the_cli_applies_it(tmp_path: Path) -> None:
    env = {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}
    for name in (LOOK_ALIKES["rlo"], LOOK_ALIKES["nel"], LOOK_ALIKES["del"], LOOK_ALIKES["trailing space"]):
        assert_clean_refusal(run_cli(["add", name], env, json.dumps(MESSAGES)), "user")
        assert_clean_refusal(run_cli(["add", "alice", "--session", name], env, json.dumps(MESSAGES)), "session_id")
        assert_clean_refusal(
            run_cli(["add", "alice", "--conversation", name], env, json.dumps(MESSAGES)), "conversation"
        )
    assert store_content(tmp_path / "cli.db") == []


@pytest.fixture
def http(tmp_path: Path) -> Any:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


def test_http_applies_it_to_body_and_path_names(http: Service) -> None:
    admin = http.admin
    for name in (LOOK_ALIKES["rlo"], LOOK_ALIKES["nel"], LOOK_ALIKES["zwsp"], LOOK_ALIKES["trailing space"]):
        resp = admin.post("/v1/users", json={"user": name})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "user", resp.text
    key = http.new_user("alice")
    client = http.client(key)
    for field in ("conversation_id", "session_id"):
        resp = client.post("/v1/memories", json={"messages": MESSAGES, field: LOOK_ALIKES["rlo"]})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == field, resp.text
    resp = admin.post("/v1/users/alice/keys", json={"label": "ops\u202elaptop"})
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "label", resp.text
    assert [u["user"] for u in admin.get("/v1/users").json()] == ["alice"]
    assert client.get("/v1/memories").json() == []


def test_mcp_applies_it(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing")

    async def main() -> list[str]:
        out = []
        async with Client(build_server(mem, user="alice")) as client:
            for field in ("conversation_id", "session_id"):
                res = await client.call_tool("add_memory", {"messages": MESSAGES, field: LOOK_ALIKES["rlo"]})
                assert res.is_error
                out.append(" ".join(getattr(c, "text", "") for c in res.content))
        return out

    try:
        texts = anyio.run(main)
        assert "conversation_id" in texts[0] and "session_id" in texts[1]
        assert mem.users() == []
    finally:
        mem.close()


# -- names stored before the rule ----------------------------------------------------------------------------

LEGACY = ["bob\u202egnp.exe", "bob ", "carol\x7f", "Jose\u0301"]


def written_under_the_old_rule(path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[Memory], object]) -> Path:
    """A store at ``path`` that ``write`` filled under the old rule (non-empty, no C0 control characters)."""
    with monkeypatch.context() as patch:
        patch.setattr(ingest_module, "check_name", check_stored_name)
        mem = Memory.open(path, embedder="hashing")
        try:
            write(mem)
        finally:
            mem.close()
    return path


@pytest.fixture
def legacy_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Look-alike names that went in under the old rule."""
    return written_under_the_old_rule(
        tmp_path / "legacy.db",
        monkeypatch,
        lambda mem: [mem.add(name, MESSAGES, session_id="old session ") for name in LEGACY],
    )


def test_legacy_names_stay_readable_and_deletable_in_python(legacy_store: Path) -> None:
    mem = Memory.open(legacy_store, embedder="hashing")
    try:
        assert sorted(u.name for u in mem.users()) == sorted(LEGACY)
        for name in LEGACY:
            blocks = mem.list(name, session_id="old session ")
            assert len(blocks) == 2 and mem.get(name, blocks[0].id).user == name
            assert mem.search(name, "bees", k=5)
            with pytest.raises(ValidationError):
                mem.add(name, MESSAGES)  # new writes follow the rule
            mem.delete(name, blocks[0].id)
        assert mem.delete_user(LEGACY[0]) == 1
        assert sorted(u.name for u in mem.users()) == sorted(LEGACY[1:])
    finally:
        mem.close()


def test_legacy_names_through_the_cli(legacy_store: Path) -> None:
    env = {"MEMLANE_STORE": str(legacy_store), "MEMLANE_EMBEDDER": "hashing"}
    res = run_cli(["users"], env)
    assert res.exit_code == 0
    assert "\u202e" not in res.stdout and "'bob\\u202egnp.exe'" in res.stdout  # shown escaped, not reversed
    res = run_cli(["list", "bob ", "--json"], env)
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 2
    assert run_cli(["search", "carol\x7f", "bees"], env).exit_code == 0
    res = run_cli(["delete-user", "bob\u202egnp.exe"], env)
    assert res.exit_code == 0, res.stderr
    assert "bob\u202egnp.exe" not in [name for name, _ in store_content(legacy_store)]


def test_legacy_names_through_http(legacy_store: Path) -> None:
    svc = make_service(legacy_store.parent, name=legacy_store.stem)  # the service over the legacy file
    try:
        admin = svc.admin
        assert sorted(u["user"] for u in admin.get("/v1/users").json()) == sorted(LEGACY)
        resp = admin.post(f"/v1/users/{quote('bob ')}/keys", json={"label": "migration"})
        assert resp.status_code == 201, resp.text
        bob = svc.client(resp.json()["key"])
        assert len(bob.get("/v1/memories").json()) == 2
        assert bob.post("/v1/search", json={"query": "bees"}).status_code == 200
        assert bob.post("/v1/memories", json={"messages": MESSAGES}).status_code == 422  # writes follow the rule
        resp = admin.delete(f"/v1/users/{quote('bob' + chr(0x202E) + 'gnp.exe')}")
        assert resp.status_code == 200 and resp.json()["blocks_deleted"] == 2, resp.text
        assert sorted(u["user"] for u in admin.get("/v1/users").json()) == sorted(LEGACY[1:])
    finally:
        svc.close()


# -- ids that cannot be one segment of a URL path ------------------------------------------------------------

NOT_A_SEGMENT = ["acme/bob", "support/ticket-1", "what?", "a#b", "50%", ".", ".."]


@pytest.mark.parametrize("name", NOT_A_SEGMENT)
def test_ids_no_url_path_can_carry_are_refused_by_the_python_api(memory: Memory, name: str) -> None:
    for field in ("user", "conversation_id", "session_id"):
        user = name if field == "user" else "alice"
        extra: dict[str, Any] = {} if field == "user" else {field: name}
        with pytest.raises(ValidationError) as err:
            memory.add(user, MESSAGES, **extra)
        assert err.value.where == field and "URL path" in str(err.value)
    with pytest.raises(ValidationError) as err:
        memory.create_user(name)
    assert err.value.where == "user"
    memory.create_user("alice", exist_ok=True)
    with pytest.raises(ValidationError) as err:
        memory.create_session("alice", name)
    assert err.value.where == "session_id"
    assert [u.name for u in memory.users()] == ["alice"] and memory.list("alice") == []


def test_ids_no_url_path_can_carry_are_refused_by_the_cli_http_and_mcp(tmp_path: Path, http: Service) -> None:
    env = {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}
    for name in ("acme/bob", "support/ticket-1", "50%"):
        assert_clean_refusal(run_cli(["add", name], env, json.dumps(MESSAGES)), "user", "URL path")
        assert_clean_refusal(run_cli(["add", "alice", "--session", name], env, json.dumps(MESSAGES)), "session_id")
        assert_clean_refusal(run_cli(["user", "create", name], env), "user")
    assert store_content(tmp_path / "cli.db") == []
    key = http.new_user("alice")
    client = http.client(key)
    for name in ("acme/bob", "..", "a#b"):
        resp = http.admin.post("/v1/users", json={"user": name})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "user", resp.text
        for field in ("conversation_id", "session_id"):
            resp = client.post("/v1/memories", json={"messages": MESSAGES, field: name})
            assert resp.status_code == 422 and resp.json()["error"]["field"] == field, resp.text
        resp = client.post("/v1/sessions", json={"session_id": name})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "session_id", resp.text
    assert client.get("/v1/memories").json() == []
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing")

    async def main() -> str:
        async with Client(build_server(mem, user="alice")) as mcp:
            res = await mcp.call_tool("add_memory", {"messages": MESSAGES, "session_id": "support/ticket-1"})
            assert res.is_error
            return " ".join(getattr(c, "text", "") for c in res.content)

    try:
        assert "session_id" in anyio.run(main) and mem.users() == []
    finally:
        mem.close()


@pytest.fixture
def slash_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store written when a '/' was refused only by POST /v1/users: acme/bob and his session went in."""
    return written_under_the_old_rule(
        tmp_path / "slash.db", monkeypatch, lambda mem: mem.add("acme/bob", MESSAGES, session_id="support/ticket-1")
    )


def test_a_stored_user_with_a_slash_is_read_keyed_and_deleted_through_the_cli_and_a_key(slash_store: Path) -> None:
    env = {"MEMLANE_STORE": str(slash_store), "MEMLANE_EMBEDDER": "hashing"}
    res = run_cli(["list", "acme/bob", "--session", "support/ticket-1", "--json"], env)
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 2, res.output
    res = run_cli(["keys", "create", "acme/bob", "--label", "migration", "--json"], env)
    assert res.exit_code == 0, res.output
    made = json.loads(res.stdout)
    assert made["user"] == "acme/bob" and made["key"].startswith("mlk_")
    svc = make_service(slash_store.parent, name=slash_store.stem)
    try:
        bob = svc.client(made["key"])  # the routes that take the user from the key reach him
        assert [b["session_id"] for b in bob.get("/v1/memories").json()] == ["support/ticket-1"] * 2
        assert bob.post("/v1/search", json={"query": "bees"}).status_code == 200
        assert bob.post("/v1/memories", json={"messages": MESSAGES}).status_code == 422  # writes follow the rule
    finally:
        svc.close()
    res = run_cli(["delete-user", "acme/bob"], env)
    assert res.exit_code == 0, res.output
    assert store_content(slash_store) == []
