"""Rewrite a store into what an older schema version wrote, to test the migrations from it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from memlane.core.store.candidates.vectors import KIND_CODES
from memlane.core.store.sqlite.schema import MIGRATIONS
from memlane.core.store.sqlite.segments import COLUMNS, Segment

KIND_NAMES = {code: name for name, code in KIND_CODES.items()}


def _ddl(script: str, table: str) -> str:
    return next(s for s in script.split(";") if f"CREATE TABLE {table}(" in s)


# The API key table the HTTP service kept in the store's file before schema 7 (CREATE TABLE IF NOT EXISTS).
HTTP_API_KEYS = """CREATE TABLE IF NOT EXISTS http_api_keys(
    key_id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
)"""


# What schema 11 (the memory model) added to existing tables.
V11_COLUMNS = {
    "users": ("display_name", "metadata"),
    "blocks": (
        "kind", "sides", "ttl_s", "expires_ts", "updated_ts", "prompt_id", "prompt_version", "fail_count",
        "last_queued_ts",
    ),
}  # fmt: skip


def downgrade_to_v11(path: Path) -> None:
    """Schema 11: API keys without a role."""
    conn = sqlite3.connect(path, isolation_level=None)
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= 12:
        conn.execute("BEGIN")
        conn.execute("ALTER TABLE api_keys DROP COLUMN role")
        conn.execute("PRAGMA user_version = 11")
        conn.execute("COMMIT")
    conn.close()


def downgrade_to_v10(path: Path) -> None:
    """Schema 10 (what the release before the memory model wrote): no sessions table, no prompt registry, no
    user display names or metadata, blocks without kind, sides, TTL, expiry, prompt or status columns."""
    downgrade_to_v11(path)
    conn = sqlite3.connect(path, isolation_level=None)
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= 11:
        conn.execute("BEGIN")
        for index in ("blocks_user_expiry", "blocks_user_session_id", "blocks_user_ingest"):
            conn.execute(f"DROP INDEX {index}")
        for table in ("sessions", "prompt_versions", "prompts", "dead_keys"):
            conn.execute(f"DROP TABLE {table}")
        for table, columns in V11_COLUMNS.items():
            for column in columns:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.execute("PRAGMA user_version = 10")
        conn.execute("COMMIT")
    conn.close()


def downgrade_to_v9(path: Path) -> None:
    """Schema 9: jobs without their count of tries that found the LLM unreachable."""
    downgrade_to_v10(path)
    conn = sqlite3.connect(path, isolation_level=None)
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= 10:
        conn.execute("BEGIN")
        for column in ("llm_failures", "llm_failing_since"):
            conn.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
        conn.execute("PRAGMA user_version = 9")
        conn.execute("COMMIT")
    conn.close()


def downgrade_to_v7(path: Path) -> None:
    """Schema 7: no retention policies."""
    downgrade_to_v9(path)
    conn = sqlite3.connect(path, isolation_level=None)
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= 8:
        conn.execute("BEGIN")
        conn.execute("DROP TABLE retention_policies")
        conn.execute("DROP TABLE retention_default")
        conn.execute("PRAGMA user_version = 7")
        conn.execute("COMMIT")
    conn.close()


def downgrade_to_v6(path: Path) -> None:
    """Schema 6: no deletion epoch or tombstones; the API keys in the HTTP service's own table, by name."""
    downgrade_to_v7(path)
    conn = sqlite3.connect(path, isolation_level=None)
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) < 7:
        conn.close()
        return
    conn.execute("BEGIN")
    conn.execute(HTTP_API_KEYS)
    conn.execute(
        "INSERT INTO http_api_keys SELECT k.key_id, u.name, k.secret_sha256, k.label, k.created_at "
        "FROM api_keys k JOIN users u ON u.id = k.user_id"
    )
    for table in ("api_keys", "deletion_epoch", "user_deletions"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DROP TABLE IF EXISTS ann_index")  # schema 8
    conn.execute("PRAGMA user_version = 6")
    conn.execute("COMMIT")
    conn.close()


def downgrade_to_v4(path: Path) -> None:
    """Schema 4: segments with float32 vectors (the dequantized ones) and no scales."""
    downgrade_to_v6(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    rows = conn.execute(f"SELECT id, user_id, {COLUMNS} FROM key_segments").fetchall()
    conn.execute("DROP TABLE key_segments")
    conn.execute(_ddl(MIGRATIONS[3][0], "key_segments"))  # type: ignore[index]
    conn.execute("CREATE INDEX key_segments_user ON key_segments(user_id, first_key)")
    for seg_id, user_id, *values in rows:
        seg = Segment.from_row(values)
        floats = seg.vectors.astype(np.float32) * seg.scales[:, None]
        conn.execute(
            "INSERT INTO key_segments VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (seg_id, user_id, *values[:4], *values[4:12], floats.tobytes()),
        )
    conn.execute("PRAGMA user_version = 4")
    conn.execute("COMMIT")
    conn.close()


def downgrade_to_v3(path: Path) -> None:
    """Schema 3: one row per key in ``key_vectors`` and ``key_terms``, no segments."""
    downgrade_to_v6(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(_ddl(str(MIGRATIONS[0]), "key_vectors"))
    conn.execute(_ddl(MIGRATIONS[2][0], "key_terms"))  # type: ignore[index]
    for user_id, *values in conn.execute(f"SELECT user_id, {COLUMNS} FROM key_segments").fetchall():
        seg = Segment.from_row(values)
        floats = seg.vectors.astype(np.float32) * seg.scales[:, None]
        offsets = seg.offsets
        for j in range(seg.n):
            a, b = int(offsets[j]), int(offsets[j + 1])
            common = (user_id, int(seg.key_pks[j]), int(seg.block_pks[j]), KIND_NAMES[int(seg.kinds[j])])
            ts = float(seg.event_ts[j])
            conn.execute("INSERT INTO key_vectors VALUES (?,?,?,?,?,?)", (*common, ts, floats[j].tobytes()))
            conn.execute(
                "INSERT INTO key_terms VALUES (?,?,?,?,?,?,?,?)",
                (*common, ts, int(seg.lengths[j]), seg.term_ids[a:b].tobytes(), seg.counts[a:b].tobytes()),
            )
    conn.execute("DROP TABLE key_segments")
    conn.execute("PRAGMA user_version = 3")
    conn.execute("COMMIT")
    conn.close()


def downgrade_to_v2(path: Path) -> None:
    """Schema 2: an FTS5 index, no term tables."""
    downgrade_to_v6(path)
    downgrade_to_v3(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("DROP TABLE key_terms")
    conn.execute("DROP TABLE terms")
    conn.execute("DROP TABLE corpus")
    fts = next(s for s in str(MIGRATIONS[0]).split(";") if "keys_fts" in s)
    conn.execute(fts)
    conn.execute("INSERT INTO keys_fts(rowid, ns, kind, text) SELECT pk, ns, kind, text FROM search_keys")
    conn.execute("PRAGMA user_version = 2")
    conn.execute("COMMIT")
    conn.close()


def downgrade_to_v5(path: Path) -> None:
    """Schema 5: segments without session codes and people's words."""
    downgrade_to_v6(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for column in ("sessions", "words_lengths", "words_entries", "words_term_ids", "words_counts"):
        conn.execute(f"ALTER TABLE key_segments DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 5")
    conn.execute("COMMIT")
    conn.close()
