"""Numbered migrations of the PostgreSQL store, and the schema (namespace) it lives in.

Never edit an applied migration; append a new one. Every per-user table has ``user_id`` leading its primary
key (``users`` its ``id``, the hash of the name: migration 9): the distribution column on Citus
(:mod:`memlane.core.store.postgres.citus`) and the clustering key of the per-user scans. The small shared
tables (``meta``, ``embed_cache``, ``api_keys``, ``deletion_epoch``, ``user_deletions``,
``retention_default``, the prompts) have none.
"""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from memlane.core.errors import StoreError
from memlane.core.store.postgres.tenant import USER_KEY_SQL

# The keyword index's text configuration: English stemming (Snowball, like FTS5's porter) and *no*
# stopwords, so token counts and BM25 statistics match the SQLite store's unicode61 + porter tokenizer.
TEXT_CONFIG = "memlane_english"

# What the people in a block's exchange said, as memlane.core.ranking.session_words.people_words reads it from the
# stored message (the same rule; tests/postgres/test_pg_store.py checks that both agree), as a tsvector.
_PEOPLE_WORDS = f"""to_tsvector('{TEXT_CONFIG}'::regconfig, CASE
        WHEN mode = 'speakers' THEN CASE WHEN starts_with(message, perspective || ': ') THEN message ELSE '' END
        WHEN perspective IN ('user', 'exchange') AND starts_with(message, 'user: ') THEN
            split_part(substr(message, 7), E'\\nassistant: ', 1)
        ELSE ''
    END)"""

MIGRATIONS: list[str] = [
    # 1: users, blocks, search keys (message/summary/fact) with tsvector, the narrow per-user vector table,
    #    the embedding cache and the extraction queue (outbox in the same database as the blocks).
    f"""
    CREATE TABLE meta(key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE users(
        id bigserial PRIMARY KEY,
        name text NOT NULL UNIQUE,
        created_at double precision NOT NULL,
        version bigint NOT NULL DEFAULT 0,    -- bumped by every change to the user's keys
        n_keys bigint NOT NULL DEFAULT 0,     -- BM25 statistics of the user's keys: how many,
        total_len bigint NOT NULL DEFAULT 0   -- and their total length in tokens
    );
    CREATE TABLE blocks(
        user_id bigint NOT NULL REFERENCES users(id),
        pk bigserial NOT NULL,
        id text NOT NULL,
        conversation_id text NOT NULL,
        session_id text NOT NULL,
        exchange_index integer NOT NULL,
        perspective text NOT NULL,
        mode text NOT NULL,
        message text NOT NULL,
        summary text,
        contexts jsonb NOT NULL DEFAULT '[]',
        message_ids jsonb NOT NULL DEFAULT '[]',
        event_ts double precision NOT NULL,
        ingest_ts double precision NOT NULL,
        time_annotation text NOT NULL,
        extraction_status text NOT NULL,
        extraction_prompt text,
        extraction_writes integer NOT NULL DEFAULT 0,
        content_hash text NOT NULL,
        annotations jsonb NOT NULL DEFAULT '{{}}',
        PRIMARY KEY (user_id, pk),
        UNIQUE (user_id, id)
    );
    CREATE INDEX blocks_user_time ON blocks(user_id, event_ts);
    CREATE INDEX blocks_user_session ON blocks(user_id, conversation_id, session_id, exchange_index);
    CREATE TEXT SEARCH DICTIONARY memlane_stem (TEMPLATE = snowball, Language = english);
    CREATE TEXT SEARCH CONFIGURATION {TEXT_CONFIG} (COPY = pg_catalog.english);
    ALTER TEXT SEARCH CONFIGURATION {TEXT_CONFIG}
        ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH memlane_stem;
    CREATE TABLE search_keys(
        user_id bigint NOT NULL,
        pk bigserial NOT NULL,
        block_pk bigint NOT NULL,
        kind text NOT NULL,               -- message | summary | fact
        text text NOT NULL,
        content_hash text NOT NULL,
        event_ts double precision NOT NULL,  -- the block's, copied so a time window needs no join
        dl integer NOT NULL,              -- length in tokens, for BM25
        tsv tsvector NOT NULL,
        PRIMARY KEY (user_id, pk),
        FOREIGN KEY (user_id, block_pk) REFERENCES blocks(user_id, pk)
    );
    CREATE INDEX search_keys_block ON search_keys(user_id, block_pk);
    CREATE INDEX search_keys_hash ON search_keys(content_hash);
    -- fastupdate off: new entries go straight into the index instead of a pending list that every
    -- search scans until vacuum merges it (measured: keyword p50 11 ms instead of 5 after a bulk load).
    CREATE INDEX search_keys_tsv ON search_keys USING gin(tsv) WITH (fastupdate = off);
    -- Narrow, so a per-user exact scan reads few pages; kept inline up to 8 kB (no TOAST detour for
    -- vectors up to ~2000 dimensions), moved out of line uncompressed beyond that.
    CREATE TABLE key_vectors(
        user_id bigint NOT NULL,
        key_pk bigint NOT NULL,
        block_pk bigint NOT NULL,
        kind smallint NOT NULL,           -- memlane.core.store.candidates.vectors.KIND_CODES
        event_ts double precision NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (user_id, key_pk)
    ) WITH (toast_tuple_target = 8160);
    ALTER TABLE key_vectors ALTER COLUMN embedding SET STORAGE EXTERNAL;
    CREATE TABLE embed_cache(
        model_id text NOT NULL,
        hash text NOT NULL,
        vector bytea NOT NULL,
        PRIMARY KEY (model_id, hash)
    );
    -- Every status change is a new tuple: leave room for HOT updates and vacuum the hot table early.
    CREATE TABLE jobs(
        user_id bigint NOT NULL,
        id bigserial NOT NULL,
        kind text NOT NULL,
        block_pk bigint NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'running', 'done', 'dead')),
        priority integer NOT NULL DEFAULT 0,
        run_after double precision NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        max_attempts integer NOT NULL,
        lease_owner text,
        lease_until double precision,
        last_error text,
        raw_response text,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        finished_at double precision,
        PRIMARY KEY (user_id, id)
    ) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01);
    CREATE INDEX jobs_id ON jobs(id);
    CREATE INDEX jobs_ready ON jobs(priority DESC, run_after, id) WHERE status = 'queued';
    CREATE INDEX jobs_lease ON jobs(lease_until) WHERE status = 'running';
    CREATE INDEX jobs_block ON jobs(user_id, block_pk);
    CREATE INDEX jobs_finished ON jobs(finished_at) WHERE status IN ('done', 'dead');
    """,
    # 2: the people's words of each block for the session-words ranking, as generated columns, so every write
    #    and every existing block has them (the rule: _PEOPLE_WORDS); and their term frequencies summed per
    #    session, kept by every write and delete (memlane.core.store.blocks.postgres_rows), which the ranking reads.
    f"""
    CREATE FUNCTION memlane_tokens(tsvector) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS $$ SELECT coalesce(sum(array_length(l.positions, 1)), 0)::integer FROM unnest($1) l $$;
    ALTER TABLE blocks ADD COLUMN words tsvector GENERATED ALWAYS AS ({_PEOPLE_WORDS}) STORED;
    ALTER TABLE blocks ADD COLUMN words_len integer GENERATED ALWAYS AS (memlane_tokens({_PEOPLE_WORDS})) STORED;
    -- the sessions' lengths in words, read by every such search, from the index alone
    CREATE INDEX blocks_user_words ON blocks(user_id, session_id) INCLUDE (words_len);
    CREATE TABLE session_terms(
        user_id bigint NOT NULL,
        lexeme text NOT NULL,
        session_id text NOT NULL,
        tf integer NOT NULL,              -- occurrences in the people's words of the session's blocks
        PRIMARY KEY (user_id, lexeme, session_id)
    );
    INSERT INTO session_terms (user_id, lexeme, session_id, tf)
    SELECT b.user_id, l.lexeme, b.session_id, sum(array_length(l.positions, 1))
    FROM blocks b, unnest(b.words) l GROUP BY b.user_id, l.lexeme, b.session_id;
    """,
    # 3: the sessions' lengths in people's words, kept per session by every write and delete like the term
    #    counts, so the ranking reads one row per session instead of one index entry per block (13.5 ms for a
    #    10k-block user until a VACUUM set the visibility map); sessions without words have no row.
    """
    CREATE TABLE session_lengths(
        user_id bigint NOT NULL,
        session_id text NOT NULL,
        words integer NOT NULL,           -- the people's words of the session's blocks
        PRIMARY KEY (user_id, session_id)
    );
    INSERT INTO session_lengths (user_id, session_id, words)
    SELECT user_id, session_id, sum(words_len) FROM blocks GROUP BY user_id, session_id HAVING sum(words_len) > 0;
    DROP INDEX blocks_user_words;
    """,
    # 4: API keys in the store (by user id, deleted with the user in one transaction; they were in a SQLite
    #    file of the HTTP service), and the deletion epoch with the tombstones of deleted names, which keep
    #    an add in flight from recreating a user deleted meanwhile (memlane.core.store.users.deletions). Small
    #    tables shared by all users, like users itself.
    """
    CREATE TABLE api_keys(
        key_id text PRIMARY KEY,
        user_id bigint NOT NULL REFERENCES users(id),
        secret_sha256 text NOT NULL,
        label text NOT NULL DEFAULT '',
        created_at double precision NOT NULL
    );
    CREATE INDEX api_keys_user ON api_keys(user_id);
    CREATE TABLE deletion_epoch(
        id integer PRIMARY KEY CHECK (id = 1),
        epoch bigint NOT NULL,            -- raised by every delete_user
        pruned_upto bigint NOT NULL       -- the highest epoch of a pruned tombstone
    );
    INSERT INTO deletion_epoch(id, epoch, pruned_upto) VALUES (1, 0, 0);
    CREATE TABLE user_deletions(
        name_sha256 text PRIMARY KEY,     -- of the deleted user's name: the name itself is not kept
        epoch bigint NOT NULL,
        deleted_at double precision NOT NULL
    );
    """,
    # 5: retention policies (memlane.core.retention): a user's own, deleted with the user, and the default
    #    for every user without one. A NULL rule is no rule.
    """
    CREATE TABLE retention_policies(
        user_id bigint PRIMARY KEY REFERENCES users(id),
        max_age_days integer,
        max_blocks bigint,
        updated_at double precision NOT NULL
    );
    CREATE TABLE retention_default(
        id integer PRIMARY KEY CHECK (id = 1),
        max_age_days integer,
        max_blocks bigint,
        updated_at double precision NOT NULL
    );
    """,
    # 6: an LLM outage does not use up a job's attempts (docs/design/002-extraction-queue.md): how many tries
    #    in a row found the LLM unreachable, and when the first of them did (NULL: the last try reached it).
    """
    ALTER TABLE jobs ADD COLUMN llm_failures integer NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN llm_failing_since double precision;
    """,
    # 7: the memory model (docs/design/007-memory-model.md). Users gain a display name and metadata;
    #    sessions become rows of their own (one per distinct session id already on a user's blocks);
    #    blocks gain their kind (exchange or fact), an exchange's two sides, a TTL and the expiry it gave
    #    (write time + TTL; NULL: never), the time of their last update, the registry prompt that extracted
    #    them, and their extraction failures. Extraction prompts are global and small (reference tables on
    #    a distributed PostgreSQL). Every new per-user key leads with user_id; every column added to blocks
    #    has a constant default, so adding it rewrites no row.
    """
    ALTER TABLE users ADD COLUMN display_name text;
    ALTER TABLE users ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}';
    CREATE INDEX users_display_name ON users(display_name) WHERE display_name IS NOT NULL;
    CREATE TABLE sessions(
        user_id bigint NOT NULL,
        conversation_id text NOT NULL,
        session_id text NOT NULL,
        started_at double precision NOT NULL,
        ended_at double precision,
        annotations jsonb NOT NULL DEFAULT '{}',
        metadata jsonb NOT NULL DEFAULT '{}',
        default_ttl_s bigint CHECK (default_ttl_s >= 0),
        created_at double precision NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );
    CREATE INDEX sessions_user_started ON sessions(user_id, started_at DESC, session_id);
    -- A session id is unique per user; one the blocks share between conversations (possible before)
    -- belongs to the first of them by name.
    INSERT INTO sessions(user_id, conversation_id, session_id, started_at, created_at)
    SELECT user_id, min(conversation_id), session_id, min(event_ts), min(ingest_ts) FROM blocks
    GROUP BY user_id, session_id;
    ALTER TABLE blocks ADD COLUMN kind text NOT NULL DEFAULT 'exchange' CHECK (kind IN ('exchange', 'fact'));
    ALTER TABLE blocks ADD COLUMN sides jsonb NOT NULL DEFAULT '[]';
    ALTER TABLE blocks ADD COLUMN ttl_s bigint CHECK (ttl_s >= 0);
    ALTER TABLE blocks ADD COLUMN expires_ts double precision;
    ALTER TABLE blocks ADD COLUMN updated_ts double precision;
    ALTER TABLE blocks ADD COLUMN prompt_id text;
    ALTER TABLE blocks ADD COLUMN prompt_version integer;
    ALTER TABLE blocks ADD COLUMN fail_count integer NOT NULL DEFAULT 0;
    ALTER TABLE blocks ADD COLUMN last_queued_ts double precision;
    -- what the queue already knows: a block whose extraction died failed once; a block was last queued
    -- when its newest job was made
    UPDATE blocks SET fail_count = 1 WHERE extraction_status = 'failed';
    UPDATE blocks b SET last_queued_ts = j.created FROM
        (SELECT user_id, block_pk, max(created_at) AS created FROM jobs GROUP BY user_id, block_pk) j
    WHERE b.user_id = j.user_id AND b.pk = j.block_pk;
    -- Only blocks with a TTL have an entry: a search of a user without one probes an empty range.
    CREATE INDEX blocks_user_expiry ON blocks(user_id, expires_ts) WHERE expires_ts IS NOT NULL;
    CREATE INDEX blocks_user_ingest ON blocks(user_id, ingest_ts);
    -- Annotation filters (exact pairs, jsonb containment); blocks without annotations add no entry.
    CREATE INDEX blocks_annotations ON blocks USING gin(annotations jsonb_path_ops) WITH (fastupdate = off);
    CREATE TABLE prompts(
        prompt_id text PRIMARY KEY,
        description text NOT NULL,
        annotations jsonb NOT NULL DEFAULT '{}',
        archived boolean NOT NULL DEFAULT false,
        current_version integer NOT NULL,
        next_version integer NOT NULL,       -- versions are numbered from 0 and never reused
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL
    );
    CREATE TABLE prompt_versions(
        prompt_id text NOT NULL REFERENCES prompts(prompt_id) ON DELETE CASCADE,
        version integer NOT NULL,
        text text NOT NULL,
        archived boolean NOT NULL DEFAULT false,
        created_at double precision NOT NULL,
        PRIMARY KEY (prompt_id, version)
    );
    """,
    # 8: an API key's role (memlane.core.apikeys.ROLES): what the key may do on its user's memory. Keys made
    #    before roles could read and write.
    """
    ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'read-write';
    """,
    # 9: a user's id is the hash of the name (memlane.core.store.postgres.tenant.user_key), so a process knows
    #    it before asking the database and a distributed PostgreSQL routes a lookup by name to the one node
    #    holding the user. Existing users get theirs here, with every row that names them; their approximate
    #    indexes (partial, on the old id) go, and the next search past the threshold makes them again.
    f"""
    ALTER TABLE blocks DROP CONSTRAINT blocks_user_id_fkey;
    ALTER TABLE search_keys DROP CONSTRAINT search_keys_user_id_block_pk_fkey;
    ALTER TABLE api_keys DROP CONSTRAINT api_keys_user_id_fkey;
    ALTER TABLE retention_policies DROP CONSTRAINT retention_policies_user_id_fkey;
    CREATE TEMPORARY TABLE memlane_rekey ON COMMIT DROP AS
        SELECT id AS old, {USER_KEY_SQL.format("name")} AS new FROM users;
    DELETE FROM memlane_rekey WHERE old = new;
    UPDATE users t SET id = r.new FROM memlane_rekey r WHERE t.id = r.old;
    UPDATE blocks t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE search_keys t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE key_vectors t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE jobs t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE sessions t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE session_terms t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE session_lengths t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE api_keys t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    UPDATE retention_policies t SET user_id = r.new FROM memlane_rekey r WHERE t.user_id = r.old;
    ALTER TABLE users ALTER COLUMN id DROP DEFAULT;
    DROP SEQUENCE users_id_seq;
    ALTER TABLE blocks ADD FOREIGN KEY (user_id) REFERENCES users(id);
    ALTER TABLE search_keys ADD FOREIGN KEY (user_id, block_pk) REFERENCES blocks(user_id, pk);
    ALTER TABLE api_keys ADD FOREIGN KEY (user_id) REFERENCES users(id);
    ALTER TABLE retention_policies ADD FOREIGN KEY (user_id) REFERENCES users(id);
    DO $$
    DECLARE r record;
    BEGIN
        FOR r IN SELECT indexrelid::regclass AS ix FROM pg_index WHERE indrelid = 'key_vectors'::regclass
                 AND indexrelid::regclass::text LIKE '%key_vectors_ann_u%' LOOP
            EXECUTE format('DROP INDEX %s', r.ix);
        END LOOP;
    END $$;
    """,
    # 10: the embedding cache found by hash alone (a block's deletion drops the cached vectors of its texts
    #    whatever model made them; a distributed store distributes the cache by hash); and the LLM call log
    #    in the store (memlane.core.store.postgres.calllog), beside the blocks whose words it holds, so that a
    #    user's deletion removes the user's calls in its own transaction wherever it runs. Calls made for no
    #    user have user_id 0.
    """
    CREATE INDEX embed_cache_hash ON embed_cache(hash);
    CREATE TABLE llm_calls(
        user_id bigint NOT NULL,
        id bigserial NOT NULL,
        created_at double precision NOT NULL,
        model text NOT NULL,
        purpose text NOT NULL DEFAULT '',
        namespace text,
        prompt_hash text NOT NULL,
        cache_key text NOT NULL,
        request text NOT NULL,
        response text,
        tokens_in integer,
        tokens_out integer,
        latency_ms double precision NOT NULL,
        error text,
        attempts integer NOT NULL,
        cached boolean NOT NULL DEFAULT false,
        ignored_keys integer NOT NULL DEFAULT 0,
        block_id text,
        PRIMARY KEY (user_id, id)
    );
    CREATE INDEX llm_calls_cache ON llm_calls(cache_key) WHERE error IS NULL AND NOT cached;
    CREATE INDEX llm_calls_block ON llm_calls(user_id, block_id);
    CREATE INDEX llm_calls_id ON llm_calls(id);
    """,
]

_EXT_SCHEMA = "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"

# One lock per schema, so processes starting together migrate one after the other.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('memlane-migrate:' || current_schema()))"


def migrate(conn: psycopg.Connection[TupleRow]) -> int:
    """Apply pending migrations, one transaction each; returns the schema version reached."""
    for version in range(1, len(MIGRATIONS) + 1):
        with conn.transaction():
            conn.execute(MIGRATION_LOCK)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations(version integer PRIMARY KEY, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
            current = int(row[0]) if row else 0
            if current > len(MIGRATIONS):
                raise StoreError(
                    f"the store's schema version {current} is newer than this memlane ({len(MIGRATIONS)}); "
                    "upgrade memlane"
                )
            if current >= version:
                continue
            conn.execute(MIGRATIONS[version - 1].encode())
            conn.execute("INSERT INTO schema_migrations(version) VALUES (%s)", (version,))
    return len(MIGRATIONS)


def store_exists(conn: psycopg.Connection[TupleRow], schema: str | None) -> bool:
    """Whether a store was ever created here: its migrations table in ``schema`` (or, without one, on the
    connection's search path). What "no store at this URL" means for a command that only reads."""
    name = sql.Identifier(schema, "schema_migrations") if schema else sql.Identifier("schema_migrations")
    row = conn.execute(sql.SQL("SELECT to_regclass({})").format(sql.Literal(name.as_string(conn)))).fetchone()
    return row is not None and row[0] is not None


def create_schema(conn: psycopg.Connection[TupleRow], schema: str) -> None:
    """Create ``schema`` unless it exists."""
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))


def drop_schema(url: str, schema: str) -> None:
    """Remove a schema and everything in it (tests and benchmarks use one schema per store)."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    except psycopg.Error as exc:
        raise StoreError(f"cannot drop schema {schema!r}: {exc}") from exc


def prepare_database(conn: psycopg.Connection[TupleRow], schema: str | None) -> str | None:
    """Create ``schema`` (if given), enable pgvector if it is missing and the role may, and return the
    search_path the store's sessions need (the schema, then pgvector's), or None if the default will do."""
    if schema:
        create_schema(conn, schema)
    ext = conn.execute(_EXT_SCHEMA).fetchone()
    if ext is None:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise StoreError(
                f"pgvector is not enabled in this database and this role cannot enable it ({exc}); "
                "a superuser must run: CREATE EXTENSION vector"
            ) from exc
        ext = conn.execute(_EXT_SCHEMA).fetchone()
    assert ext is not None
    path = [schema] if schema else []
    visible = conn.execute("SELECT to_regtype('vector') IS NOT NULL").fetchone()
    if path or not (visible and visible[0]):
        row = conn.execute("SELECT current_setting('search_path')").fetchone()
        base = [sql.Identifier(s).as_string(conn) for s in path] or [str(row[0]) if row else "public"]
        search_path = ", ".join([*base, sql.Identifier(str(ext[0])).as_string(conn)])
        conn.execute(f"SET search_path TO {search_path}")
        return search_path
    return None
