"""On PostgreSQL "no store" means no memlane tables where the URL points (its schema or search path): the
CLI's read-only commands exit 3 there and create nothing; init and add create the tables."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from click.testing import CliRunner

from memlane.core.errors import StoreNotFoundError
from memlane.core.store.postgres.store import PostgresStore
from memlane.interfaces.cli.app import cli, register_all

pytestmark = pytest.mark.postgres
register_all()


def run(args: list[str], url: str, stdin: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, input=stdin, env={"MEMLANE_STORE": url, "MEMLANE_EMBEDDER": "hashing"})
    return res.exit_code, res.stdout, res.stderr


def tables(pg_url: str, schema: str) -> list[str]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
        return sorted(str(r[0]) for r in rows)


def test_read_only_commands_on_a_schema_without_a_store_exit_3(schema_url: str, pg_url: str) -> None:
    schema = schema_url.rsplit("%3D", 1)[1]
    for args in (["search", "alice", "q"], ["users"], ["delete-user", "alice"], ["queue", "status"]):
        code, _, err = run(args, schema_url)
        assert code == 3 and "no store at postgresql://" in err and "no memlane tables" in err, err
    assert tables(pg_url, schema) == []
    code, out, _ = run(["init"], schema_url)
    assert code == 0 and out.startswith("created a store at postgresql://")
    assert "users" in tables(pg_url, schema) and "api_keys" in tables(pg_url, schema)
    code, out, _ = run(["users", "--json"], schema_url)
    assert code == 0 and json.loads(out) == []


def test_a_missing_schema_is_no_store_and_is_not_created(pg_url: str) -> None:
    schema = f"test_missing_{uuid.uuid4().hex[:12]}"
    with pytest.raises(StoreNotFoundError, match="no store at"):
        PostgresStore(pg_url, schema=schema, create=False)
    with psycopg.connect(pg_url) as conn:
        found = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found == (0,)
