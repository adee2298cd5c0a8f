"""Writing and deleting search keys: the rows behind both retrievers (tsvector keys and the vector table).

Every change also moves the user's counters in the same transaction: ``version`` (any change), and the
BM25 statistics ``n_keys`` and ``total_len`` that keyword search reads instead of scanning the corpus.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.core.embedding.protocol import Vectors
from memlane.core.store.candidates.vectors import KIND_CODES
from memlane.core.store.postgres.adapt import vector_bytes
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.schema import TEXT_CONFIG

# (block pk, kind, text, content hash, event time as epoch seconds)
KeyRow = tuple[int, str, str, str, float]

# dl counts token positions, which is what FTS5's bm25() calls the document length (no stopwords here).
INSERT_KEYS = f"""
WITH ins AS (
    INSERT INTO search_keys (user_id, pk, block_pk, kind, text, content_hash, event_ts, dl, tsv)
    SELECT %(user_id)s, x.pk, x.block_pk, x.kind, x.text, x.hash, x.ts,
           (SELECT coalesce(sum(array_length(l.positions, 1)), 0) FROM unnest(x.tsv) l), x.tsv
    FROM (
        SELECT v.*, to_tsvector('{TEXT_CONFIG}', v.text) AS tsv
        FROM unnest(%(key_pks)s::bigint[], %(block_pks)s::bigint[], %(key_kinds)s::text[], %(texts)s::text[],
                    %(hashes)s::text[], %(times)s::float8[])
            AS v(pk, block_pk, kind, text, hash, ts)
    ) x
    RETURNING dl
)
SELECT count(*), coalesce(sum(dl), 0) FROM ins
"""
_COPY_VECTORS = "COPY key_vectors (user_id, key_pk, block_pk, kind, event_ts, embedding) FROM STDIN (FORMAT BINARY)"


def next_ids(conn: Conn, sequence: str, n: int) -> list[int]:
    """``n`` fresh values of ``sequence``, ascending: ids known before the rows are written, so related
    rows (keys and their vectors, blocks and their jobs) can be written in bulk without RETURNING."""
    if n <= 0:
        return []
    rows = conn.execute("SELECT nextval(%s::regclass) FROM generate_series(1, %s)", (sequence, n)).fetchall()
    return sorted(int(r[0]) for r in rows)


def insert_keys(conn: Conn, vector_oid: int, user_id: int, rows: Sequence[KeyRow], vectors: Vectors) -> tuple[int, int]:
    """Insert keys with their tsvectors and vectors; returns (keys added, tokens added) for the counters."""
    if not rows:
        return 0, 0
    pks = next_ids(conn, "search_keys_pk_seq", len(rows))
    res = conn.execute(
        INSERT_KEYS,
        {
            "user_id": user_id,
            "key_pks": pks,
            "block_pks": [r[0] for r in rows],
            "key_kinds": [r[1] for r in rows],
            "texts": [r[2] for r in rows],
            "hashes": [r[3] for r in rows],
            "times": [r[4] for r in rows],
        },
    ).fetchone()
    assert res is not None
    with conn.cursor() as cur, cur.copy(_COPY_VECTORS) as copy:
        copy.set_types(["int8", "int8", "int8", "int2", "float8", vector_oid])
        for pk, row, vec in zip(pks, rows, vectors, strict=True):
            copy.write_row((user_id, pk, row[0], KIND_CODES[row[1]], row[4], vector_bytes(vec)))
    return int(res[0]), int(res[1])


def delete_block_keys(conn: Conn, user_id: int, block_pks: Sequence[int], *, keep_messages: bool) -> tuple[int, int]:
    """Delete the keys of these blocks (all, or all but their message keys) from both tables; returns
    (keys removed, tokens removed) for the counters."""
    kind_filter = "AND kind <> 'message'" if keep_messages else ""
    res = conn.execute(
        f"""
        WITH d AS (
            DELETE FROM search_keys WHERE user_id = %s AND block_pk = ANY(%s) {kind_filter} RETURNING pk, dl
        ), v AS (
            DELETE FROM key_vectors WHERE user_id = %s AND key_pk IN (SELECT pk FROM d)
        )
        SELECT count(*), coalesce(sum(dl), 0) FROM d
        """,
        (user_id, list(block_pks), user_id),
    ).fetchone()
    assert res is not None
    return int(res[0]), int(res[1])


BUMP_USER = (
    "UPDATE users SET version = version + 1, n_keys = n_keys + %(keys)s, total_len = total_len + %(tokens)s "
    "WHERE id = %(user_id)s"
)


def bump_user(conn: Conn, user_id: int, keys: int = 0, tokens: int = 0) -> None:
    """Record a change of the user's keys: the version and the BM25 statistics."""
    conn.execute(BUMP_USER, {"keys": keys, "tokens": tokens, "user_id": user_id})
