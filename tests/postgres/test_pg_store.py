"""PostgreSQL-specific behaviour: selection by URL, several stores on one database, migrations, errors,
and ranking parity with the SQLite store (vectors within int8 rounding, BM25 close to FTS5's)."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from memlane.bench.perf import sentence
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ConfigError, NotFoundError, StoreError
from memlane.core.memory import AddRequest, Memory
from memlane.core.model import BlockKind, KeyRecord
from memlane.core.ranking.session_words import people_words, session_word_ranks
from memlane.core.retention import RetentionPolicy
from memlane.core.retrieval import PRESETS
from memlane.core.store.postgres import is_postgres_url, redact
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.schema import MIGRATIONS, prepare_database
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.postgres.tenant import user_key
from memlane.core.store.sqlite import SqliteStore
from memlane.core.timefmt import to_epoch

pytestmark = pytest.mark.postgres

NewStore = Callable[..., PostgresStore]
T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def test_urls_are_recognised_and_redacted() -> None:
    assert is_postgres_url("postgresql://u@h/db") and is_postgres_url("postgres://u@h/db")
    assert not is_postgres_url("memlane.db") and not is_postgres_url(Path("postgresql://x"))
    assert redact("postgresql://app:s3cret@db:5432/app") == "postgresql://app:***@db:5432/app"
    assert redact("postgresql://app@db/app") == "postgresql://app@db/app"


def test_the_former_sharded_stores_url_list_is_refused_with_the_way_to_citus() -> None:
    with pytest.raises(ConfigError, match="Citus") as err:
        Memory.open("postgresql://a:pw@h1/db,postgresql://a:pw@h2/db", embedder=HashingEmbedder())
    assert "pw" not in str(err.value)
    with pytest.raises(StoreError):  # libpq's own multi-host URL is one store (failover), tried as such
        PostgresStore("postgresql://127.0.0.1:1,127.0.0.1:2/db", timeout_s=2)


def test_memory_open_selects_postgres_by_url(schema_url: str) -> None:
    mem = Memory.open(schema_url, embedder=HashingEmbedder())
    try:
        assert isinstance(mem.store, PostgresStore)
    finally:
        mem.close()


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError) as err:
        PostgresStore("postgresql://memlane:hunter2@127.0.0.1:1/memlane", timeout_s=2)
    assert "hunter2" not in str(err.value) and "***" in str(err.value)


def test_two_stores_on_one_schema_see_each_others_writes(new_store: NewStore) -> None:
    """Two API processes sharing the database: no per-process state can go stale."""
    store = new_store()
    first = Memory(store, HashingEmbedder())
    second = Memory(new_store(schema=store.schema), HashingEmbedder())
    first.add("alice", chat("alice plays the violin", "nice"), time=T0)
    assert len(second.search("alice", "violin", k=10, mode="vector", distinct=False)) == 2
    second.add("alice", chat("alice plays the cello", "lovely"), time=T0)
    hits = first.search("alice", "cello", k=10, mode="hybrid", distinct=False)
    assert len(hits) == 4 and "cello" in hits[0].block.message
    second.delete_user("alice")
    assert first.search("alice", "cello", k=10) == []
    with pytest.raises(NotFoundError):
        first.delete_user("alice")


def test_schemas_are_separate_stores(new_store: NewStore) -> None:
    a, b = Memory(new_store(), HashingEmbedder()), Memory(new_store(), HashingEmbedder())
    a.add("alice", chat("only in the first schema"))
    assert b.users() == [] and b.search("alice", "first schema") == []


def test_migrations_run_once_even_when_processes_start_together(new_store: NewStore, pg_url: str) -> None:
    schema = new_store().schema
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            new_store(schema=schema)
        except BaseException as exc:  # collected: an exception in a thread would be lost
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = new_store(schema=schema)
    assert store.query("SELECT array_agg(version ORDER BY version) FROM schema_migrations") == [
        (list(range(1, len(MIGRATIONS) + 1)),)
    ]


def test_a_newer_schema_is_refused(new_store: NewStore) -> None:
    store = new_store()
    with store.transaction() as conn:
        conn.execute("INSERT INTO schema_migrations(version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreError, match="newer than this memlane"):
        new_store(schema=store.schema)


def test_integrity_check_notices_an_index_out_of_step(new_store: NewStore) -> None:
    mem = Memory(new_store(), HashingEmbedder())
    mem.add("alice", chat("some words", "more words"))
    store = mem.store
    assert isinstance(store, PostgresStore)
    assert store.integrity_check() == []
    with store.transaction() as conn:
        conn.execute("DELETE FROM key_vectors WHERE key_pk = (SELECT min(key_pk) FROM key_vectors)")
    assert store.integrity_check() == ["search keys without a vector: 1"]
    with store.transaction() as conn:
        conn.execute("UPDATE session_terms SET tf = tf + 1 WHERE lexeme = 'word'")
        conn.execute("UPDATE session_lengths SET words = words + 1")
    assert store.integrity_check() == [
        "search keys without a vector: 1",
        "users whose session term counts are off: 1",
        "sessions whose length is off: 1",
    ]


USER_TABLES = (
    "blocks", "search_keys", "key_vectors", "jobs", "sessions", "session_terms", "session_lengths", "api_keys",
    "retention_policies",
)  # fmt: skip


def undo_migration_9(conn: Conn) -> None:
    """Back to schema 8: users numbered by a sequence (1, 2, ... in name order), every row that names them
    with them; no call log table nor the cache's hash index (schema 10)."""
    conn.execute("DROP TABLE IF EXISTS llm_calls")
    conn.execute("DROP INDEX IF EXISTS embed_cache_hash")
    for fk in ("blocks_user_id_fkey", "search_keys_user_id_block_pk_fkey"):
        conn.execute(f"ALTER TABLE {fk.split('_user_id')[0]} DROP CONSTRAINT IF EXISTS {fk}")
    for fk in ("api_keys_user_id_fkey", "retention_policies_user_id_fkey"):
        conn.execute(f"ALTER TABLE IF EXISTS {fk.removesuffix('_user_id_fkey')} DROP CONSTRAINT IF EXISTS {fk}")
    conn.execute(
        "CREATE TEMPORARY TABLE old_ids AS SELECT id AS new, row_number() OVER (ORDER BY name) AS old FROM users"
    )
    conn.execute("UPDATE users u SET id = o.old FROM old_ids o WHERE u.id = o.new")
    for table in USER_TABLES:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,):
            conn.execute(f"UPDATE {table} t SET user_id = o.old FROM old_ids o WHERE t.user_id = o.new")
    conn.execute("DROP TABLE old_ids")
    conn.execute("CREATE SEQUENCE IF NOT EXISTS users_id_seq OWNED BY users.id")
    conn.execute("SELECT setval('users_id_seq', (SELECT coalesce(max(id), 0) + 1 FROM users), false)")
    conn.execute("ALTER TABLE users ALTER COLUMN id SET DEFAULT nextval('users_id_seq')")
    conn.execute("ALTER TABLE blocks ADD FOREIGN KEY (user_id) REFERENCES users(id)")
    conn.execute("ALTER TABLE search_keys ADD FOREIGN KEY (user_id, block_pk) REFERENCES blocks(user_id, pk)")
    for table in ("api_keys", "retention_policies"):
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,):
            conn.execute(f"ALTER TABLE {table} ADD FOREIGN KEY (user_id) REFERENCES users(id)")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 9")


def undo_migration_7(conn: Conn) -> None:
    """Back to schema 6 (the last before the memory model): no sessions table, prompts, users' display
    names and metadata, nor the blocks' kind, sides, TTL, expiry, update time, prompt and failure count
    (nor the API keys' role, schema 8, nor users' ids from their names, schema 9)."""
    undo_migration_9(conn)
    conn.execute("ALTER TABLE api_keys DROP COLUMN IF EXISTS role")
    conn.execute("DROP TABLE IF EXISTS sessions, prompt_versions, prompts")
    conn.execute("ALTER TABLE users DROP COLUMN IF EXISTS display_name, DROP COLUMN IF EXISTS metadata")
    conn.execute(
        "ALTER TABLE blocks DROP COLUMN IF EXISTS kind, DROP COLUMN IF EXISTS sides, DROP COLUMN IF EXISTS ttl_s, "
        "DROP COLUMN IF EXISTS expires_ts, DROP COLUMN IF EXISTS updated_ts, DROP COLUMN IF EXISTS prompt_id, "
        "DROP COLUMN IF EXISTS prompt_version, DROP COLUMN IF EXISTS fail_count, "
        "DROP COLUMN IF EXISTS last_queued_ts"
    )
    conn.execute("DROP INDEX IF EXISTS blocks_user_ingest, blocks_annotations")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 7")


def undo_migration_4(conn: Conn) -> None:
    """Back to schema 3: no API keys, deletion epoch or tombstones (and no retention policies, schema 5, nor
    the jobs' count of tries that found the LLM unreachable, schema 6, nor the memory model, schema 7)."""
    undo_migration_7(conn)
    conn.execute("ALTER TABLE jobs DROP COLUMN IF EXISTS llm_failures, DROP COLUMN IF EXISTS llm_failing_since")
    conn.execute("DROP TABLE IF EXISTS retention_policies, retention_default")
    conn.execute("DROP TABLE api_keys, deletion_epoch, user_deletions")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 4")


def test_migration_2_gives_existing_blocks_their_peoples_words(new_store: NewStore) -> None:
    store = new_store()
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(2)
    for user, mode, roles in (
        ("ann", "single", ("user", "assistant")),
        ("bo", "dual", ("user", "assistant")),
        ("cy", "speakers", ("Cy", "Dee")),
    ):
        for s in range(5):
            lines = [sentence(rng, 100 * s + i) for i in range(4)]
            if s == 3 and mode != "speakers":
                lines = ["hello, how can I help?", *lines]  # an exchange the assistant opens
                roles = (roles[1], roles[0])
            turns = [{"role": roles[i % 2], "content": t} for i, t in enumerate(lines)]
            mem.add(user, turns, session_id=f"s{s}", time=T0 + timedelta(days=s), perspective=mode)
    odd = [{"role": "user", "content": "a quote:\nassistant: hi there"}, {"role": "assistant", "content": "ok"}]
    mem.add("ann", odd, session_id="odd", perspective="single")  # the case that reads short, in both rules
    for user in ("ann", "bo"):  # deletes take words out of the session counts
        mem.delete(user, mem.list(user, session_id="s1")[0].id)
    assert store.integrity_check() == []
    sessions = sorted({str(r[0]) for r in store.query("SELECT session_id FROM blocks")})
    queries = _queries()
    before = {
        (u, q): session_word_ranks(store.session_word_counts(u, q, sessions))
        for u in ("ann", "bo", "cy")
        for q in queries
    }
    words = store.query("SELECT pk, words, words_len FROM blocks ORDER BY pk")
    counts = store.query("SELECT * FROM session_terms ORDER BY user_id, lexeme, session_id")
    lengths = store.query("SELECT * FROM session_lengths ORDER BY user_id, session_id")
    assert sum(bool(v) for v in before.values()) >= 10 and counts and lengths
    # the generated columns hold what people_words reads from each block (the rule in SQL and in Python)
    with store.transaction() as conn:
        for pk, message, mode, perspective, tsv in conn.execute(
            "SELECT pk, message, mode, perspective, words::text FROM blocks"
        ).fetchall():
            expected = conn.execute(
                "SELECT to_tsvector('memlane_english', %s)::text", (people_words(message, mode, perspective),)
            ).fetchone()
            assert expected is not None and tsv == expected[0], pk
        conn.execute("DROP TABLE session_terms, session_lengths")
        conn.execute("ALTER TABLE blocks DROP COLUMN words, DROP COLUMN words_len")
        conn.execute("DROP FUNCTION memlane_tokens(tsvector)")
        undo_migration_4(conn)
        conn.execute("DELETE FROM schema_migrations WHERE version >= 2")
    migrated = new_store(schema=store.schema)  # migrations 2 and 3
    assert migrated.query("SELECT pk, words, words_len FROM blocks ORDER BY pk") == words
    assert migrated.query("SELECT * FROM session_terms ORDER BY user_id, lexeme, session_id") == counts
    assert migrated.query("SELECT * FROM session_lengths ORDER BY user_id, session_id") == lengths
    assert {
        (u, q): session_word_ranks(migrated.session_word_counts(u, q, sessions))
        for u in ("ann", "bo", "cy")
        for q in queries
    } == before
    assert migrated.integrity_check() == []


def test_migration_9_gives_existing_users_the_ids_of_their_names(new_store: NewStore) -> None:
    store = new_store()
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(9)
    for user in ("ann", "bo", "cy"):
        for s in range(3):
            mem.add(user, chat(sentence(rng, s), sentence(rng, s + 1)), session_id=f"s{s}")
    store.add_api_key(KeyRecord(key_id="key-bo", user="bo", label="bo's key", created_at=1.0), "0" * 64)
    store.set_retention("cy", RetentionPolicy(max_blocks=100))
    before = {u: [(h.block.id, round(h.score, 9)) for h in mem.search(u, "word", k=5)] for u in ("ann", "bo", "cy")}
    blocks_of_bo = store.count_blocks("bo")
    with store.transaction() as conn:
        undo_migration_9(conn)
    assert sorted(int(r[0]) for r in store.query("SELECT id FROM users")) == [1, 2, 3]
    migrated = new_store(schema=store.schema)  # migrations 9 and 10
    assert {str(n): int(i) for i, n in migrated.query("SELECT id, name FROM users")} == {
        u: user_key(u) for u in ("ann", "bo", "cy")
    }
    again = Memory(migrated, HashingEmbedder())
    assert {u: [(h.block.id, round(h.score, 9)) for h in again.search(u, "word", k=5)] for u in before} == before
    key = migrated.get_api_key("key-bo")
    assert key is not None and key.record.user == "bo"
    assert migrated.retention_policies().users == {"cy": RetentionPolicy(max_blocks=100)}
    assert migrated.integrity_check() == []
    assert blocks_of_bo and again.delete_user("bo") == blocks_of_bo and migrated.user_row_counts("bo")["blocks"] == 0


def test_two_names_with_one_id_cannot_both_exist(new_store: NewStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's id is the hash of the name: a second name with the same hash (forced here) is refused, naming
    the first, and the first user's rows are untouched."""
    from memlane.core.store.postgres import base
    from memlane.core.store.users import postgres as users

    store = new_store()
    mem = Memory(store, HashingEmbedder())
    mem.add("ann", chat("ann's note", "ok"))
    same = user_key("ann")
    for module in (base, users):
        monkeypatch.setattr(module, "user_key", lambda name: same)
    with pytest.raises(StoreError, match="held by user 'ann'"):
        mem.add("bo", chat("bo's note", "ok"))
    with pytest.raises(StoreError, match="held by user 'ann'"):
        store.create_user("bo")
    monkeypatch.undo()
    assert {b.message for b in mem.list("ann")} == {"user: ann's note\nassistant: ok"}
    assert [u.name for u in store.list_users()] == ["ann"]


def test_a_new_user_written_by_many_threads_at_once_is_created_once(new_store: NewStore) -> None:
    """The first writes of a new name, started together on separate connections, all succeed: the name is
    unique as well as its id, and a racing insert that finds either taken must wait and see the row, never
    fail on the other's constraint (it did in a round or two of a hundred)."""
    store = new_store(pool_max=8)
    rounds, writers = 400, 6
    errors: list[str] = []
    for round_ in range(rounds):
        start = threading.Barrier(writers)

        def write(i: int, user: str = f"racer-{round_:03d}", start: threading.Barrier = start) -> None:
            start.wait()
            try:
                if i == 0:
                    store.create_user(user)
                else:
                    with store.transaction() as conn:
                        store._lock_user(conn, user, create=True)  # what every first write does
            except StoreError as e:
                errors.append(str(e))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert [u.name for u in store.list_users()] == [f"racer-{r:03d}" for r in range(rounds)]


def test_migration_3_counts_the_sessions_lengths_of_an_existing_store(new_store: NewStore) -> None:
    store = new_store()
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(3)
    for s in range(6):
        turns = [{"role": ("user", "assistant")[i % 2], "content": sentence(rng, 10 * s + i)} for i in range(6)]
        mem.add("ann", turns, session_id=f"s{s}", perspective="single")
    mem.add("ann", [{"role": "assistant", "content": "only the assistant"}], session_id="quiet")  # no words
    mem.delete("ann", mem.list("ann", session_id="s2")[0].id)
    for block in mem.list("ann", session_id="s4"):  # a session whose words all go
        mem.delete("ann", block.id)
    lengths = store.query("SELECT session_id, words FROM session_lengths ORDER BY session_id")
    assert [s for s, _ in lengths] == ["s0", "s1", "s2", "s3", "s5"] and store.integrity_check() == []
    sessions = [f"s{i}" for i in range(6)]
    before = {q: session_word_ranks(store.session_word_counts("ann", q, sessions)) for q in _queries()}
    with store.transaction() as conn:
        undo_migration_4(conn)
        conn.execute("DROP TABLE session_lengths")
        conn.execute("CREATE INDEX blocks_user_words ON blocks(user_id, session_id) INCLUDE (words_len)")
        conn.execute("DELETE FROM schema_migrations WHERE version = 3")
    migrated = new_store(schema=store.schema)
    assert migrated.query("SELECT session_id, words FROM session_lengths ORDER BY session_id") == lengths
    assert {q: session_word_ranks(migrated.session_word_counts("ann", q, sessions)) for q in _queries()} == before
    dropped = "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s"
    assert migrated.query(dropped, ("blocks_user_words",)) == [(0,)]
    assert migrated.integrity_check() == []


def _corpus(n: int = 300) -> list[AddRequest]:
    rng = random.Random(11)
    return [
        AddRequest(
            f"user{i % 2}",
            chat(sentence(rng, i), sentence(rng, 10_000 + i)),
            session_id=f"s{i}",
            time=T0 + timedelta(hours=i),
            perspective="single",
        )
        for i in range(n)
    ]


def _queries() -> list[str]:
    rng = random.Random(5)
    return [sentence(rng, 99_999)[:40] for _ in range(15)] + [
        "Lisbon trip",
        "vegan lasagna dentist",
        "chess tournament after work",
        "my sister painted the garden shed",
        "marathon training plan in March",
        "note number 17",
        "quarterly report yesterday",
        "used Mazda",
        "wedding playlist party",
        "pottery workshop last Tuesday",
    ]


VECTOR_ONLY = replace(PRESETS["vector"], supersede=False)
KEYWORD_ONLY = replace(PRESETS["keyword"], supersede=False)


def test_rankings_match_the_sqlite_store(new_store: NewStore, tmp_path: Path) -> None:
    """Nearly the same vectors (SQLite's are int8), so nearly the same vector ranking; BM25 with FTS5's
    formula, tokenised by Snowball instead of porter, so nearly the same keyword ranking (measured on this
    corpus: top-1 agrees on every query)."""
    emb = HashingEmbedder()
    pg = Memory(new_store(), emb)
    lite = Memory(SqliteStore(tmp_path / "lite.db"), emb)
    for mem in (pg, lite):
        mem.add_many(_corpus())
    top1 = overlap = 0.0
    queries = _queries()
    for q in queries:
        for user in ("user0", "user1"):
            # SQLite keeps int8 vectors, within half a quantization step of PostgreSQL's float32 ones: the
            # same ranking, but for near ties, and scores within 0.005.
            # The retrievers' own order: supersession off (it may move a newer block above a better score).
            pv = {h.block.message: h.score for h in pg.search(user, q, k=10, mode=VECTOR_ONLY)}
            lv = {h.block.message: h.score for h in lite.search(user, q, k=10, mode=VECTOR_ONLY)}
            both = [m for m in lv if m in pv]
            assert len(both) >= len(pv) - 1, q
            assert all(abs(lv[m] - pv[m]) <= 0.005 for m in both), q
            assert all(pv[a] >= pv[b] - 0.01 for a, b in itertools.pairwise(both)), q
            pk = [h.block.message for h in pg.search(user, q, k=10, mode=KEYWORD_ONLY)]
            lk = [h.block.message for h in lite.search(user, q, k=10, mode=KEYWORD_ONLY)]
            top1 += bool(pk and lk and pk[0] == lk[0])
            overlap += len(set(pk) & set(lk)) / max(1, len(lk))
    n = 2 * len(queries)
    print(f"BM25 parity over {n} queries: top-1 agreement {top1 / n:.2f}, mean overlap@10 {overlap / n:.2f}")
    assert top1 / n >= 0.9 and overlap / n >= 0.8
    # The session-words ranking (one exchange per session here): the same first sessions.
    first = 0
    sessions = [f"s{i}" for i in range(300)]
    for q in queries:
        for user in ("user0", "user1"):
            best = [
                {
                    s
                    for s, rank in session_word_ranks(mem.store.session_word_counts(user, q, sessions)).items()
                    if rank == 1
                }
                for mem in (pg, lite)
            ]
            first += best[0] == best[1] and bool(best[0])
    print(f"session-words parity: the same first session on {first} of {n} queries")
    assert first / n >= 0.9


def test_recluster_rewrites_the_tables_and_changes_no_search(new_store: NewStore) -> None:
    """``PostgresStore.recluster`` (docs/scaling.md: maintenance, off-peak) keeps every row and every ranking."""
    store = new_store()
    mem = Memory(store, HashingEmbedder())
    mem.add_many(_corpus(60))
    queries = _queries()[:5]
    before = {
        (u, q): [(h.block.id, h.score) for h in mem.search(u, q, k=5)] for u in ("user0", "user1") for q in queries
    }
    counts = store.user_row_counts("user0")
    store.recluster()
    assert store.integrity_check() == []
    assert store.user_row_counts("user0") == counts
    after = {
        (u, q): [(h.block.id, h.score) for h in mem.search(u, q, k=5)] for u in ("user0", "user1") for q in queries
    }
    assert after == before and any(before.values())


def _catalog(store: PostgresStore, schema: str | None = None) -> list[tuple[object, ...]]:
    """The tables, columns and indexes of ``schema`` (default: the store's): what two stores of one schema
    version share."""
    name = schema or store.schema
    return store.query(
        "SELECT table_name, column_name, data_type, is_nullable, replace(column_default, %s || '.', '') "
        "FROM information_schema.columns WHERE table_schema = %s ORDER BY table_name, column_name",
        (name, name),
    ) + store.query(
        "SELECT tablename, indexname, regexp_replace(indexdef, ' ON [^ ]+\\.', ' ON ') FROM pg_indexes "
        "WHERE schemaname = %s ORDER BY tablename, indexname",
        (name,),
    )


def test_a_store_made_before_the_memory_model_migrates(
    new_store: NewStore, new_schema: Callable[[], str], pg_url: str
) -> None:
    """A store at schema 6 (what the release before the memory model made) opens: one session per session id
    on its blocks (started at the first block's event time), every block an exchange that never expires, the
    searches unchanged."""
    store = new_store()
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(6)
    for user in ("ann", "bo"):
        for s in range(3):
            for i in range(2):
                mem.add(user, chat(sentence(rng, 10 * s + i), sentence(rng, 100 + i)), session_id=f"s{s}",
                        time=T0 + timedelta(days=s, hours=i), perspective="single")  # fmt: skip
    mem.add("ann", chat("in another conversation", "ok"), session_id="s0", conversation_id="other",
            time=T0 - timedelta(days=1), perspective="single")  # fmt: skip
    queries = _queries()[:5]
    before = {(u, q, m): [h.block.id for h in mem.search(u, q, k=5, mode=m)]
              for u in ("ann", "bo") for q in queries for m in ("vector", "keyword", "hybrid")}  # fmt: skip
    listed = {u: [b.id for b in mem.list(u)] for u in ("ann", "bo")}
    failed, queued = listed["ann"][0], listed["ann"][1]
    with store.transaction() as conn:
        undo_migration_7(conn)
        # what the previous release knew of extraction: a block whose job died, a block with a job
        conn.execute("UPDATE blocks SET extraction_status = 'failed' WHERE id = %s", (failed,))
        conn.execute(
            "INSERT INTO jobs(user_id, id, kind, block_pk, status, run_after, max_attempts, created_at, updated_at) "
            "SELECT user_id, 1, 'extract', pk, 'done', 0, 3, 1700000000.5, 0 FROM blocks WHERE id = %s",
            (queued,),
        )
    # the undone schema is the one the previous release's migrations (1 to 6, never edited) make
    old = new_schema()
    with psycopg.connect(pg_url) as conn:
        prepare_database(conn, old)
        conn.execute(
            "CREATE TABLE schema_migrations(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for statement in MIGRATIONS[:6]:
            conn.execute(statement.encode())
    assert _catalog(store) == _catalog(store, old)
    migrated = new_store(schema=store.schema)
    assert migrated.query("SELECT max(version) FROM schema_migrations") == [(len(MIGRATIONS),)]
    sessions = migrated.list_sessions("ann", limit=10, offset=0, now=to_epoch(T0) + 1e9)
    assert sorted((s.session_id, s.conversation_id, s.blocks) for s in sessions.items) == [
        ("s0", "default", 3), ("s1", "default", 2), ("s2", "default", 2)
    ]  # fmt: skip
    s0 = next(s for s in sessions.items if s.session_id == "s0")
    assert s0.started_at == T0 - timedelta(days=1) and not s0.ended and s0.default_ttl_s is None
    blocks = migrated.list_blocks("ann", limit=100)
    assert [b.id for b in blocks] == listed["ann"]
    assert {(b.kind, b.expires_at, b.ttl_s) for b in blocks} == {(BlockKind.EXCHANGE, None, None)}
    assert [(b.id, b.fail_count, b.status) for b in blocks if b.fail_count] == [(failed, 1, "extraction_failed")]
    assert [(b.id, to_epoch(b.last_queued_at)) for b in blocks if b.last_queued_at] == [(queued, 1700000000.5)]
    assert migrated.get_user("bo").sessions == 3
    mem2 = Memory(migrated, HashingEmbedder())
    after = {(u, q, m): [h.block.id for h in mem2.search(u, q, k=5, mode=m)]
             for u in ("ann", "bo") for q in queries for m in ("vector", "keyword", "hybrid")}  # fmt: skip
    assert after == before
    assert migrated.integrity_check() == []
