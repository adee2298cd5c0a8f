"""`memlane retention show | set | apply`, the policy column of `memlane users`, and the worker's sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

register_all()


def chat(i: int) -> str:
    return json.dumps([{"role": "user", "content": f"thing {i}"}, {"role": "assistant", "content": f"ok {i}"}])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, input=stdin, env=env)
    return res.exit_code, res.stdout, res.stderr


def add_days(env: dict[str, str], user: str, days: range) -> None:
    for d in days:
        code, _, err = run(
            ["add", user, "--session", f"s{d}", "--time", f"2024-01-{d + 1:02d}T12:00:00Z"], env, chat(d)
        )
        assert code == 0, err


def test_set_show_apply_and_users(env: dict[str, str]) -> None:
    add_days(env, "alice", range(10))
    add_days(env, "bob", range(10))
    assert run(["retention", "set", "--max-age-days", "5"], env) == (0, "default: 5 days\n", "")
    assert run(["retention", "set", "--user", "bob", "--max-blocks", "4"], env)[0] == 0
    code, out, _ = run(["retention", "show", "--json"], env)
    assert json.loads(out) == {
        "default": {"max_age_days": 5, "max_blocks": None},
        "users": {"bob": {"max_age_days": None, "max_blocks": 4}},
    }
    assert run(["retention", "show"], env)[1] == "default: 5 days\nbob: newest 4 blocks\n"
    assert run(["retention", "show", "--user", "alice"], env)[1] == "alice: 5 days (default)\n"
    code, out, _ = run(["users"], env)
    assert out.splitlines() == ["alice\t20\tdefault", "bob\t20\tnewest 4 blocks"]
    code, out, _ = run(["users", "--json"], env)
    assert [u["retention"] for u in json.loads(out)] == ["default", {"max_age_days": None, "max_blocks": 4}]

    at = ["--at", "2024-01-10T13:00:00Z"]  # the cutoff is 5 January 13:00: days 1-5 go
    code, out, _ = run(["retention", "apply", "--dry-run", *at, "--json"], env)
    report = json.loads(out)
    assert code == 0 and report["dry_run"] and report["expired"] == 10 + 16
    assert len(json.loads(run(["list", "alice", "--json"], env)[1])) == 20
    code, out, _ = run(["retention", "apply", "--user", "alice", *at], env)
    assert code == 0 and out.splitlines() == [
        "alice: deleted 10 blocks, 10 left (default policy)",
        "deleted 10 blocks of 1 users",
    ]
    code, out, _ = run(["retention", "apply", *at], env)
    assert out.splitlines()[-1] == "deleted 16 blocks of 1 users"
    assert [u["blocks"] for u in json.loads(run(["users", "--json"], env)[1])] == [10, 4]
    assert run(["retention", "set", "--user", "bob", "--clear"], env)[1] == "bob: cleared\n"
    assert run(["retention", "show", "--user", "bob"], env)[1] == "bob: 5 days (default)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["set", "--max-age-days", "0"], "--max-age-days: must be from 1 to 36,500, not 0"),
        (["set", "--max-age-days", "-5"], "--max-age-days: must be from 1 to 36,500, not -5"),
        (["set", "--max-blocks", "99999999999999999999999"], "--max-blocks: must be from 1 to 1,000,000,000"),
        (["set"], "options: give --max-age-days and/or --max-blocks, or --keep-all, or --clear"),
        (["set", "--keep-all", "--max-blocks", "3"], "options: give"),
        (["apply", "--at", "yesterday-ish"], "--at:"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(env: dict[str, str], args: list[str], message: str) -> None:
    add_days(env, "alice", range(1))
    code, _, err = run(["retention", *args], env)
    assert code == 2 and err.startswith(f"error: {message}"), err
    assert "Traceback" not in err


def test_unknown_users_and_missing_stores_exit_3(env: dict[str, str], tmp_path: Path) -> None:
    add_days(env, "alice", range(1))
    for args in (
        ["set", "--user", "carol", "--max-blocks", "3"],
        ["show", "--user", "carol"],
        ["apply", "--user", "carol"],
    ):
        code, _, err = run(["retention", *args], env)
        assert code == 3 and err == "error: user 'carol' not found\n", (args, err)
    missing = env | {"MEMLANE_STORE": str(tmp_path / "none.db")}
    for args in (["show"], ["apply"], ["set", "--max-age-days", "3"]):
        code, _, err = run(["retention", *args], missing)
        assert code == 3 and "no store at" in err
    assert not (tmp_path / "none.db").exists()


def test_a_non_integer_value_is_a_usage_error(env: dict[str, str]) -> None:
    add_days(env, "alice", range(1))
    code, _, err = run(["retention", "set", "--max-age-days", "ninety"], env)
    assert code == 2 and "'ninety' is not a valid integer" in err


def test_the_worker_sweeps_when_it_starts(env: dict[str, str]) -> None:
    add_days(env, "alice", range(3))
    assert run(["retention", "set", "--max-age-days", "30"], env)[0] == 0  # 2024 is long gone
    worker = env | {"MEMLANE_LLM": "scripted"}
    code, out, err = run(["worker", "--drain", "--poll", "0.01", "--retention-every", "3600"], worker)
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["sweeps"] == 1
    assert json.loads(run(["users", "--json"], env)[1])[0]["blocks"] == 0
    code, _, err = run(["worker", "--drain", "--retention-every", "-1"], worker)
    assert code == 2


def test_serve_refuses_a_negative_sweep_interval(env: dict[str, str]) -> None:
    code, _, err = run(["serve", "--insecure-dev", "--retention-every", "-5"], env)
    assert code == 2 and "--retention-every" in err


@pytest.mark.parametrize("at", ["0001-01-01", "0001-01-01T00:00:00Z", "1:56 pm on 1 January, 0001"])
def test_a_sweep_at_the_first_representable_time_expires_nothing(env: dict[str, str], at: str) -> None:
    add_days(env, "alice", range(3))
    assert run(["retention", "set", "--max-age-days", "36500"], env)[0] == 0
    for dry in (["--dry-run"], []):
        code, out, err = run(["retention", "apply", "--at", at, "--json", *dry], env)
        assert code == 0 and "Traceback" not in err, err
        assert json.loads(out)["expired"] == 0 and json.loads(out)["at"].startswith("0001-01-01")
    assert len(json.loads(run(["list", "alice", "--json"], env)[1])) == 6


def test_a_sweep_far_in_the_future_asks_before_it_deletes(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from memlane.interfaces.cli import retention_cmds

    add_days(env, "alice", range(3))
    assert run(["retention", "set", "--max-age-days", "1"], env)[0] == 0
    at = ["--at", "9999-12-31T23:59:59Z"]
    code, out, _ = run(["retention", "apply", *at, "--dry-run", "--json"], env)
    assert code == 0 and json.loads(out)["expired"] == 6  # a dry run only counts: no question
    # Without a terminal to ask on (a script, a pipe): refused, naming the option and the way through.
    code, out, err = run(["retention", "apply", *at], env)
    assert code == 2 and "--at" in err and "--yes" in err and "deletes 6 blocks of 1 users" in err, err
    assert "a sweep now would delete 6" in err
    assert len(json.loads(run(["list", "alice", "--json"], env)[1])) == 6
    monkeypatch.setattr(retention_cmds, "interactive", lambda: True)
    code, out, err = run(["retention", "apply", *at], env, "n\n")
    assert code == 1 and "nothing deleted" in err
    assert len(json.loads(run(["list", "alice", "--json"], env)[1])) == 6
    code, out, err = run(["retention", "apply", *at], env, "y\n")
    assert code == 0 and "deleted 6 blocks of 1 users" in out, (out, err)
    add_days(env, "alice", range(2))
    monkeypatch.setattr(retention_cmds, "interactive", lambda: False)
    code, out, _ = run(["retention", "apply", *at, "--yes", "--json"], env)
    assert code == 0 and json.loads(out)["expired"] == 4


def test_a_clock_in_the_future_that_deletes_nothing_needs_no_answer(env: dict[str, str]) -> None:
    add_days(env, "alice", range(2))
    assert run(["retention", "apply", "--at", "2999-01-01"], env)[0] == 0  # no policy: nothing to delete
