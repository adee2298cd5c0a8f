"""The schema distributes by user (Citus, docs/scaling.md): read from the catalog of a freshly migrated store,
every per-user table's primary key and unique constraints lead with ``user_id``, and every foreign key stays
within one user (``user_id`` leading both sides) or points at a small table shared by all users."""

from __future__ import annotations

from pg_stores import NewStore

from memlane.core.store.postgres.store import PostgresStore

# Small tables every node would hold a copy of (Citus reference tables): no user_id distributes them.
REFERENCE = {
    "meta",
    "users",
    "embed_cache",
    "deletion_epoch",
    "user_deletions",
    "retention_default",
    "prompts",
    "prompt_versions",
    "schema_migrations",
}
# Per-user tables whose key does not lead with user_id, each with why (all older than the memory model):
# an API key is looked up by its id before its user is known (docs/scaling.md lists it among the paths a
# distributed store routes differently).
LEGACY = {"api_keys": "looked up by key id before the user is known"}

_CONSTRAINTS = """
SELECT c.conrelid::regclass::text, c.conname, c.contype,
       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),
       c.confrelid::regclass::text,
       ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)
FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
WHERE t.relnamespace = current_schema()::regnamespace AND c.contype IN ('p', 'u', 'f')
ORDER BY 1, 2
"""


def _per_user(store: PostgresStore) -> set[str]:
    rows = store.query(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND column_name = 'user_id'"
    )
    return {str(r[0]) for r in rows}


def problems(store: PostgresStore) -> list[str]:
    """The keys of the store's schema that would not distribute by user."""
    per_user = _per_user(store)
    found = []
    for table, name, kind, columns, target, target_columns in store.query(_CONSTRAINTS):
        table = str(table).split(".")[-1]
        target = str(target).split(".")[-1] if kind == "f" else None
        if table not in per_user or table in LEGACY:
            if kind == "f" and target in per_user:  # a shared table never points into one user's rows
                found.append(f"{table}.{name} -> {target}")
            continue
        if kind in ("p", "u") and columns[0] != "user_id":
            found.append(f"{table}.{name} {list(columns)} does not lead with user_id")
        if (
            kind == "f"
            and target not in REFERENCE
            and (target in LEGACY or columns[0] != "user_id" or target_columns[0] != "user_id")
        ):
            found.append(f"{table}.{name} {list(columns)} -> {target}{list(target_columns)} crosses users")
    return found


def test_every_per_user_key_leads_with_the_user(new_store: NewStore) -> None:
    store = new_store()
    tables = {str(r[0]) for r in store.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    per_user = _per_user(store)
    # Every table is either one user's rows or a small shared one: a new table must choose.
    assert tables - per_user - REFERENCE == set()
    assert {"sessions", "blocks", "search_keys", "key_vectors", "jobs"} <= per_user
    assert not per_user & REFERENCE
    keys = {(str(r[0]).split(".")[-1], str(r[2])): list(r[3]) for r in store.query(_CONSTRAINTS)}
    assert keys[("sessions", "p")] == ["user_id", "session_id"]
    assert problems(store) == []


def test_the_check_notices_keys_that_cross_users(new_store: NewStore) -> None:
    store = new_store()
    with store.transaction() as conn:
        conn.execute("CREATE TABLE odd(user_id bigint NOT NULL, x text NOT NULL, UNIQUE (x, user_id))")
        conn.execute(
            "CREATE TABLE odder(user_id bigint NOT NULL, x text NOT NULL, PRIMARY KEY (user_id, x), "
            "FOREIGN KEY (x, user_id) REFERENCES odd(x, user_id))"
        )
    assert problems(store) == [
        "odd.odd_x_user_id_key ['x', 'user_id'] does not lead with user_id",
        "odder.odder_x_user_id_fkey ['x', 'user_id'] -> odd['x', 'user_id'] crosses users",
    ]
