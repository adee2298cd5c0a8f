"""The CLI on a PostgreSQL store: ``--store``/``MEMLANE_STORE`` take a URL (here one whose libpq options pick
a schema, as a user's own URL may)."""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

pytestmark = pytest.mark.postgres
register_all()


def test_add_search_delete_through_the_cli(schema_url: str, pg_url: str) -> None:
    url = schema_url
    env = {"MEMLANE_STORE": url, "MEMLANE_EMBEDDER": "hashing"}
    messages = [{"role": "user", "content": "My sister Ana moved to Lisbon."}, {"role": "assistant", "content": "Ok"}]
    runner = CliRunner()
    res = runner.invoke(cli, ["add", "alice", "--json"], input=json.dumps(messages), env=env)
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["search", "alice", "where does Ana live", "-k", "1", "--json"], env=env)
    assert res.exit_code == 0 and "Lisbon" in json.loads(res.stdout)[0]["message"]
    res = runner.invoke(cli, ["queue", "status", "--json"], env=env)
    assert res.exit_code == 0 and json.loads(res.stdout)["queued"] == 0
    res = runner.invoke(cli, ["delete-user", "alice"], env=env)
    assert res.exit_code == 0 and "2 blocks" in res.stdout
    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(pg_url) as conn:  # the tables went to the URL's schema
        assert conn.execute(f'SELECT count(*) FROM "{schema}".users').fetchone() == (0,)


def test_a_bad_url_exits_1_with_a_message() -> None:
    env = {"MEMLANE_STORE": "postgresql://x:pw@127.0.0.1:1/none", "MEMLANE_EMBEDDER": "hashing"}
    res = CliRunner().invoke(cli, ["list", "alice"], env=env)
    assert res.exit_code == 1 and "cannot open the store" in res.stderr and "pw@" not in res.stderr


def test_a_cli_search_builds_no_index_and_index_build_makes_it(schema_url: str) -> None:
    """Past the threshold a command's search starts no CREATE INDEX (it would end before it); `memlane index
    build` makes the user's index in the foreground and `memlane index status` shows it ready."""
    env = {"MEMLANE_STORE": schema_url, "MEMLANE_EMBEDDER": "hashing", "MEMLANE_ANN_THRESHOLD": "20"}
    messages = []
    for i in range(30):  # 30 exchanges, two blocks (keys) each
        messages += [{"role": "user", "content": f"note {i} about topic {i % 5}"}]
        messages += [{"role": "assistant", "content": "ok"}]
    runner = CliRunner()
    assert runner.invoke(cli, ["add", "alice"], input=json.dumps(messages), env=env).exit_code == 0
    res = runner.invoke(cli, ["search", "alice", "topic 3", "-k", "2"], env=env)
    assert res.exit_code == 0 and "topic 3" in res.stdout
    res = runner.invoke(cli, ["index", "status", "--json"], env=env)
    assert res.exit_code == 0, res.output
    (status,) = json.loads(res.stdout)["users"]
    assert (status["keys"], status["needed"], status["state"]) == (60, True, "none")
    res = runner.invoke(cli, ["index", "build", "--all"], env=env)
    assert res.exit_code == 0 and "alice\t60 keys\tready\t60 indexed" in res.stdout, res.output
    res = runner.invoke(cli, ["index", "status", "alice", "--json"], env=env)
    assert json.loads(res.stdout)["users"][0]["state"] == "ready"
