"""`Store.check` and `memlane check` on PostgreSQL: memlane's cross-table checks always, amcheck's B-tree and heap
checks where the extension is installed (in a database of its own here, so no other test sees it), and a
report that says so when it is not; the quick check reads the checksum failures where checksums are on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.postgres.store import PostgresStore
from memlane.interfaces.cli.app import cli, register_all

pytestmark = pytest.mark.postgres
register_all()
NewStore = Callable[..., PostgresStore]


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]


@pytest.fixture
def own_database(pg_url: str) -> Iterator[str]:
    """A database of its own, with pgvector and amcheck installed, dropped at the end."""
    name = f"memlane_check_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'amcheck'").fetchone()
        if available is None:
            pytest.skip("the amcheck contrib module is not available on this server")
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlsplit(pg_url)._replace(path=f"/{name}").geturl()  # a URL, as --store takes it
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
            conn.execute("CREATE EXTENSION amcheck")
        yield url
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_amcheck_checks_every_index_and_table_where_it_is_installed(own_database: str) -> None:
    store = PostgresStore(own_database, pool_max=2)
    try:
        mem = Memory(store, HashingEmbedder())
        for i in range(20):
            mem.add(f"user{i % 3}", chat(f"exchange {i} about bees"))
        found = store.check()
        assert found.ok, found.problems
        assert any("bt_index_check" in r for r in found.ran) and any("verify_heapam" in r for r in found.ran)
        assert not any("not installed" in n for n in found.notes)
    finally:
        store.close()
    res = CliRunner().invoke(cli, ["check", "--json"], env={"MEMLANE_STORE": own_database})
    report = json.loads(res.stdout)
    assert res.exit_code == 0 and report["ok"] and any("amcheck" in r for r in report["ran"])


def test_without_amcheck_the_report_says_it_did_not_run(new_store: NewStore) -> None:
    store = new_store()
    Memory(store, HashingEmbedder()).add("alice", chat("I keep bees."))
    found = store.check()
    installed = store.query("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'")
    assert found.ok and any("cross-table" in r for r in found.ran)
    if not installed:
        assert any("amcheck is not installed" in n for n in found.notes)
    quick = store.check(quick=True)
    on = store.query("SHOW data_checksums")[0][0] == "on"
    assert quick.ok and (bool(quick.ran) if on else any("checksums are off" in n for n in quick.notes))


def test_memlane_check_on_a_postgres_url(schema_url: str) -> None:
    Memory.open(schema_url, embedder="hashing").close()
    res = CliRunner().invoke(cli, ["check"], env={"MEMLANE_STORE": schema_url})
    assert res.exit_code == 0 and ": ok\n" in res.stdout and "cross-table" in res.stdout, res.stdout + res.stderr
