"""`memlane keys create | list | revoke`: the Python API's keys from a shell; each key opens the user's memory
over HTTP, a revoked one no longer does; bad input is a one-line error and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from memlane.core.apikeys import ApiKeys
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.cli.app import cli, register_all

register_all()


def run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, list(args), env=env)
    return res.exit_code, res.stdout, res.stderr


def test_keys_are_made_listed_and_revoked_from_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    env = {"MEMLANE_STORE": str(path), "MEMLANE_EMBEDDER": "hashing"}
    assert run(env, "user", "create", "alice")[0] == 0
    code, out, err = run(env, "keys", "create", "alice", "--label", "laptop")
    assert code == 0 and out.startswith("mlk_") and "shown this once" in err
    plain_key = out.strip()
    code, out, _ = run(env, "keys", "create", "alice", "--role", "read-only", "--json")
    made = json.loads(out)
    assert code == 0 and made["user"] == "alice" and made["role"] == "read-only" and made["label"] == ""
    code, out, _ = run(env, "keys", "list", "alice", "--json")
    listed = json.loads(out)
    assert [k["key_id"] for k in listed] == [plain_key.split("_")[1], made["key_id"]]
    assert listed[0]["label"] == "laptop" and "key" not in listed[0]  # never the secret
    code, out, _ = run(env, "keys", "list", "alice")
    assert out.splitlines()[0].split("\t")[:2] == [listed[0]["key_id"], "read-write"]
    code, out, _ = run(env, "keys", "revoke", "alice", made["key_id"], "--json")
    assert code == 0 and json.loads(out) == {"user": "alice", "key_id": made["key_id"], "revoked": True}
    assert [k["key_id"] for k in json.loads(run(env, "keys", "list", "alice", "--json")[1])] == [listed[0]["key_id"]]
    store = SqliteStore(path)
    try:  # what the HTTP service checks a bearer key with
        verified = ApiKeys(store).verify(plain_key)
        assert verified is not None and verified.record.user == "alice"
        assert ApiKeys(store).verify(made["key"]) is None  # revoked
    finally:
        store.close()


def test_bad_input_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    env = {"MEMLANE_STORE": str(tmp_path / "k.db"), "MEMLANE_EMBEDDER": "hashing"}
    assert run(env, "user", "create", "alice")[0] == 0
    code, _, err = run(env, "keys", "create", "nobody")
    assert code == 3 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    code, _, err = run(env, "keys", "create", "alice", "--label", "ops\u202elaptop")
    assert code == 2 and "label" in err
    code, _, err = run(env, "keys", "revoke", "alice", "feedfacecafe")
    assert code == 3 and "feedfacecafe" in err
    assert json.loads(run(env, "keys", "list", "alice", "--json")[1]) == []


def test_help_shows_an_example_and_each_options_environment_variable() -> None:
    for sub in ("create", "list", "revoke"):
        code, out, _ = run({}, "keys", sub, "--help")
        out = " ".join(out.split())  # click wraps the help
        assert code == 0 and "Example:" in out and "memlane keys " + sub in out
        assert "[env MEMLANE_STORE]" in out and "[env MEMLANE_EMBEDDER]" in out
    assert "memlane keys create alice" in run({}, "keys", "--help")[1]
