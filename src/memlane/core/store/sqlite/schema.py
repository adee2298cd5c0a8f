"""Numbered migrations of the SQLite store. Never edit an applied migration; append a new one."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memlane.core.errors import StoreError
from memlane.core.store.sqlite.segments import add_words, from_rows, quantize_segments
from memlane.core.store.sqlite.terms import backfill


def move_interface_keys(conn: sqlite3.Connection) -> None:
    """Migration 7: the keys an earlier HTTP service kept in its own table (``http_api_keys``, by user
    name) move into ``api_keys``. Keys of names with no user left are those of users deleted outside the
    service, which the old table kept by mistake: they are dropped, not moved."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'http_api_keys'").fetchone() is None:
        return
    conn.execute(
        "INSERT OR IGNORE INTO api_keys(key_id, user_id, secret_sha256, label, created_at) "
        "SELECT k.key_id, u.id, k.secret_sha256, k.label, k.created_at FROM http_api_keys k "
        "JOIN users u ON u.name = k.user"
    )
    conn.execute("DROP TABLE http_api_keys")


# The columns of key_segments but its vectors, as migration 4 made them (5 changes only how vectors are held).
_SEGMENT_COLUMNS = """\
            id INTEGER PRIMARY KEY,
            user_id INTEGER NOT NULL,
            keys INTEGER NOT NULL,         -- keys in the segment (at least 1)
            first_key INTEGER NOT NULL,    -- smallest and largest key pk
            last_key INTEGER NOT NULL,
            tokens INTEGER NOT NULL,       -- tokens of its keys
            key_pks BLOB NOT NULL,         -- int64 per key, ascending
            block_pks BLOB NOT NULL,       -- int64 per key
            kinds BLOB NOT NULL,           -- int8 kind code per key
            event_ts BLOB NOT NULL,        -- float64 per key
            lengths BLOB NOT NULL,         -- int32 tokens per key
            entries BLOB NOT NULL,         -- int32 term entries per key
            term_ids BLOB NOT NULL,        -- int32 per (key, term) entry, ascending within a key
            counts BLOB NOT NULL,          -- uint16 occurrences per entry
"""

# A migration is SQL, or SQL followed by a Python step run in the same transaction.
Migration = str | tuple[str, Callable[[sqlite3.Connection], None], str]

MIGRATIONS: list[Migration] = [
    # 1: users, blocks, search keys (message/summary/fact) with their vectors and FTS5 index, embedding cache
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE users(
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        version INTEGER NOT NULL DEFAULT 0   -- bumped by every change to the user's keys: cache validity
    );
    CREATE TABLE blocks(
        pk INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        user_id INTEGER NOT NULL REFERENCES users(id),
        conversation_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        exchange_index INTEGER NOT NULL,
        perspective TEXT NOT NULL,
        mode TEXT NOT NULL,
        message TEXT NOT NULL,
        summary TEXT,
        contexts TEXT NOT NULL DEFAULT '[]',
        message_ids TEXT NOT NULL DEFAULT '[]',
        event_ts REAL NOT NULL,
        ingest_ts REAL NOT NULL,
        time_annotation TEXT NOT NULL,
        extraction_status TEXT NOT NULL,
        extraction_prompt TEXT,
        content_hash TEXT NOT NULL,
        annotations TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX blocks_user_time ON blocks(user_id, event_ts);
    CREATE INDEX blocks_user_session ON blocks(user_id, conversation_id, session_id, exchange_index);
    CREATE TABLE search_keys(
        pk INTEGER PRIMARY KEY,
        user_id INTEGER NOT NULL,
        block_pk INTEGER NOT NULL REFERENCES blocks(pk),
        ns TEXT NOT NULL,          -- 'u' || user_id: the namespace filter inside the FTS5 MATCH
        kind TEXT NOT NULL,        -- message | summary | fact
        text TEXT NOT NULL,
        content_hash TEXT NOT NULL
    );
    CREATE INDEX search_keys_block ON search_keys(block_pk);
    CREATE INDEX search_keys_user ON search_keys(user_id);
    CREATE INDEX search_keys_hash ON search_keys(content_hash);
    CREATE VIRTUAL TABLE keys_fts USING fts5(
        ns, kind, text, content='search_keys', content_rowid='pk',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    -- One user's vectors are contiguous (clustered by user), so loading a user reads few pages.
    CREATE TABLE key_vectors(
        user_id INTEGER NOT NULL,
        key_pk INTEGER NOT NULL,
        block_pk INTEGER NOT NULL,
        kind TEXT NOT NULL,
        event_ts REAL NOT NULL,
        embedding BLOB NOT NULL,
        PRIMARY KEY(user_id, key_pk)
    ) WITHOUT ROWID;
    CREATE TABLE embed_cache(
        model_id TEXT NOT NULL,
        hash TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY(model_id, hash)
    ) WITHOUT ROWID;
    """,
    # 2: the extraction queue (outbox in the same file as the blocks) and a count of extraction writes
    """
    CREATE TABLE jobs(
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        user_id INTEGER NOT NULL,
        block_pk INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'dead')),
        priority INTEGER NOT NULL DEFAULT 0,
        run_after REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        lease_owner TEXT,
        lease_until REAL,
        last_error TEXT,
        raw_response TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE INDEX jobs_ready ON jobs(priority DESC, run_after, id) WHERE status = 'queued';
    CREATE INDEX jobs_lease ON jobs(lease_until) WHERE status = 'running';
    CREATE INDEX jobs_user ON jobs(user_id);
    CREATE INDEX jobs_block ON jobs(block_pk);
    CREATE INDEX jobs_finished ON jobs(finished_at) WHERE status IN ('done', 'dead');
    ALTER TABLE blocks ADD COLUMN extraction_writes INTEGER NOT NULL DEFAULT 0;
    """,
    # 3: the keyword index moves from FTS5 to term tables with document frequencies kept by every write
    # (core/store/candidates/terms.py says why); existing keys are indexed, then the FTS5 table is dropped.
    (
        """
        CREATE TABLE terms(
            id INTEGER PRIMARY KEY,
            term TEXT NOT NULL UNIQUE,
            df INTEGER NOT NULL            -- keys (of all users) holding the term
        );
        -- Clustered by user like key_vectors: loading one user's index reads few pages.
        CREATE TABLE key_terms(
            user_id INTEGER NOT NULL,
            key_pk INTEGER NOT NULL,
            block_pk INTEGER NOT NULL,
            kind TEXT NOT NULL,
            event_ts REAL NOT NULL,
            length INTEGER NOT NULL,       -- tokens in the key
            term_ids BLOB NOT NULL,        -- int32 term ids, ascending
            counts BLOB NOT NULL,          -- uint16 occurrences of each
            PRIMARY KEY(user_id, key_pk)
        ) WITHOUT ROWID;
        CREATE TABLE corpus(
            id INTEGER PRIMARY KEY CHECK (id = 1),
            keys INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            vocab_epoch INTEGER NOT NULL DEFAULT 0   -- bumped by every deletion of a term row
        );
        INSERT INTO corpus(id, keys, tokens) VALUES (1, 0, 0);
        """,
        backfill,
        "DROP TABLE keys_fts;",
    ),
    # 4: each user's key vectors and term bags move from one row per key into a few segments per user
    # (core/store/sqlite/segments.py says why); existing keys are moved, then the per-key tables dropped.
    (
        f"""
        CREATE TABLE key_segments(
{_SEGMENT_COLUMNS}            vectors BLOB NOT NULL          -- float32 keys x dim
        );
        CREATE INDEX key_segments_user ON key_segments(user_id, first_key);
        """,
        from_rows,
        "DROP TABLE key_vectors;\nDROP TABLE key_terms;",
    ),
    # 5: segment vectors as int8 with a float32 scale per key, a quarter of the bytes a cold search reads
    # (core/store/sqlite/segments.py says why); every segment is rewritten, then the old table dropped.
    (
        f"""
        ALTER TABLE key_segments RENAME TO key_segments_v4;
        DROP INDEX key_segments_user;
        CREATE TABLE key_segments(
{_SEGMENT_COLUMNS}            vectors BLOB NOT NULL,         -- int8 keys x dim
            scales BLOB NOT NULL           -- float32 per key: a key's vector is its int8 row times its scale
        );
        CREATE INDEX key_segments_user ON key_segments(user_id, first_key);
        """,
        quantize_segments,
        "DROP TABLE key_segments_v4;",
    ),
    # 6: each key's session and the people's words of its block (message keys), for the session-words
    # ranking (core/ranking/session_words.py, counted by core/store/candidates/terms.py); existing segments get them
    # from their blocks.
    (
        """
        ALTER TABLE key_segments ADD COLUMN sessions BLOB NOT NULL DEFAULT x'';        -- int64 code per key
        ALTER TABLE key_segments ADD COLUMN words_lengths BLOB NOT NULL DEFAULT x'';   -- int32 words per key
        ALTER TABLE key_segments ADD COLUMN words_entries BLOB NOT NULL DEFAULT x'';   -- int32 per key
        ALTER TABLE key_segments ADD COLUMN words_term_ids BLOB NOT NULL DEFAULT x'';  -- int32 per entry
        ALTER TABLE key_segments ADD COLUMN words_counts BLOB NOT NULL DEFAULT x'';    -- uint16 per entry
        """,
        add_words,
        "",
    ),
    # 7: API keys move into the store (by user id, deleted with the user in one transaction), from the HTTP
    # service's own table where there is one; the deletion epoch and the tombstones of deleted names, which
    # keep an add in flight from recreating a user deleted meanwhile (core/store/users/deletions.py says how).
    (
        """
        CREATE TABLE api_keys(
            key_id TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            secret_sha256 TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL
        );
        CREATE INDEX api_keys_user ON api_keys(user_id);
        CREATE TABLE deletion_epoch(
            id INTEGER PRIMARY KEY CHECK (id = 1),
            epoch INTEGER NOT NULL,        -- raised by every delete_user
            pruned_upto INTEGER NOT NULL   -- the highest epoch of a pruned tombstone
        );
        INSERT INTO deletion_epoch(id, epoch, pruned_upto) VALUES (1, 0, 0);
        CREATE TABLE user_deletions(
            name_sha256 TEXT PRIMARY KEY,  -- of the deleted user's name: the name itself is not kept
            epoch INTEGER NOT NULL,
            deleted_at REAL NOT NULL
        );
        """,
        move_interface_keys,
        "",
    ),
    # 8: retention policies (core/retention.py): a user's own, deleted with the user, and the default for
    # every user without one. A NULL rule is no rule.
    """
    CREATE TABLE retention_policies(
        user_id INTEGER PRIMARY KEY REFERENCES users(id),
        max_age_days INTEGER,
        max_blocks INTEGER,
        updated_at REAL NOT NULL
    );
    CREATE TABLE retention_default(
        id INTEGER PRIMARY KEY CHECK (id = 1),
        max_age_days INTEGER,
        max_blocks INTEGER,
        updated_at REAL NOT NULL
    );
    """,
    # 9: where each large user's approximate vector index stands (memlane.core.store.sqlite.ann): its file
    # beside the database, a generation (compare-and-set by the processes that build it), the watermark
    # (the highest key pk it holds), how many keys it holds and how many of them were deleted since.
    """
    CREATE TABLE ann_index(
        user_id INTEGER PRIMARY KEY REFERENCES users(id),
        file TEXT NOT NULL,
        generation INTEGER NOT NULL,
        max_key_pk INTEGER NOT NULL,
        keys INTEGER NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0
    );
    """,
    # 10: an LLM outage does not use up a job's attempts (docs/design/002-extraction-queue.md): how many tries
    # in a row found the LLM unreachable, and when the first of them did (NULL: the last try reached it).
    """
    ALTER TABLE jobs ADD COLUMN llm_failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN llm_failing_since REAL;
    """,
    # 11: the memory model (docs/design/007-memory-model.md): users' display names and metadata; sessions
    # as rows (one per session id already on a user's blocks: its conversation the first it was used in,
    # its start the earliest event time); blocks' kind, sides, TTL and expiry, update time, registry prompt
    # and extraction status; the registry of extraction prompts (a small table shared by every user). The
    # user's key leads every new per-user key (docs/design/007-memory-model.md, "Distribution").
    """
    ALTER TABLE users ADD COLUMN display_name TEXT;
    ALTER TABLE users ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
    CREATE TABLE sessions(
        user_id INTEGER NOT NULL REFERENCES users(id),
        session_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        started_at REAL NOT NULL,
        ended_at REAL,
        annotations TEXT NOT NULL DEFAULT '{}',
        metadata TEXT NOT NULL DEFAULT '{}',
        default_ttl_s INTEGER,
        created_at REAL NOT NULL,
        PRIMARY KEY(user_id, session_id)
    ) WITHOUT ROWID;
    ALTER TABLE blocks ADD COLUMN kind TEXT NOT NULL DEFAULT 'exchange';
    ALTER TABLE blocks ADD COLUMN sides TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE blocks ADD COLUMN ttl_s INTEGER;
    ALTER TABLE blocks ADD COLUMN expires_ts REAL;
    ALTER TABLE blocks ADD COLUMN updated_ts REAL;
    ALTER TABLE blocks ADD COLUMN prompt_id TEXT;
    ALTER TABLE blocks ADD COLUMN prompt_version INTEGER;
    ALTER TABLE blocks ADD COLUMN fail_count INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE blocks ADD COLUMN last_queued_ts REAL;
    CREATE INDEX blocks_user_expiry ON blocks(user_id, expires_ts) WHERE expires_ts IS NOT NULL;
    CREATE INDEX blocks_user_session_id ON blocks(user_id, session_id);
    CREATE INDEX blocks_user_ingest ON blocks(user_id, ingest_ts);
    INSERT INTO sessions(user_id, session_id, conversation_id, started_at, created_at)
        SELECT user_id, session_id, min(conversation_id), min(event_ts), min(ingest_ts)
        FROM blocks GROUP BY user_id, session_id;
    UPDATE blocks SET fail_count = 1 WHERE extraction_status = 'failed';
    UPDATE blocks SET last_queued_ts = (SELECT max(j.created_at) FROM jobs j WHERE j.block_pk = blocks.pk)
        WHERE extraction_status != 'off';
    -- Keys an update retired: out of the statistics, the ANN index and every load at once, their rows
    -- taken out of the segments by the next rewrite of those (core/store/sqlite/segments.py says why).
    CREATE TABLE dead_keys(
        user_id INTEGER NOT NULL,
        key_pk INTEGER NOT NULL,
        block_pk INTEGER NOT NULL,
        PRIMARY KEY(user_id, key_pk)
    ) WITHOUT ROWID;
    CREATE INDEX dead_keys_block ON dead_keys(user_id, block_pk);
    CREATE TABLE prompts(
        prompt_id TEXT PRIMARY KEY,
        description TEXT NOT NULL,
        annotations TEXT NOT NULL DEFAULT '{}',
        archived INTEGER NOT NULL DEFAULT 0,
        current_version INTEGER NOT NULL,
        next_version INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE prompt_versions(
        prompt_id TEXT NOT NULL REFERENCES prompts(prompt_id),
        version INTEGER NOT NULL,
        text TEXT NOT NULL,
        created_at REAL NOT NULL,
        archived INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY(prompt_id, version)
    ) WITHOUT ROWID;
    """,
    # 12: an API key's role (memlane.core.apikeys.ROLES): what the key may do on its user's memory. Keys made
    # before roles could read and write.
    """
    ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'read-write';
    """,
]


def migrate(conn: sqlite3.Connection) -> int:
    """Apply pending migrations in one transaction each; returns the schema version reached."""
    current = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if current > len(MIGRATIONS):
        raise StoreError(
            f"the store's schema version {current} is newer than this memlane ({len(MIGRATIONS)}); upgrade memlane"
        )
    for version in range(current + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= version:
                conn.execute("COMMIT")
                continue
            _apply(conn, MIGRATIONS[version - 1])
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(MIGRATIONS)


def _apply(conn: sqlite3.Connection, migration: Migration) -> None:
    before, step, after = (migration, None, "") if isinstance(migration, str) else migration
    for stmt in _statements(before):
        conn.execute(stmt)
    if step is not None:
        step(conn)
    for stmt in _statements(after):
        conn.execute(stmt)


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT our transaction; split on complete statements instead.
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
