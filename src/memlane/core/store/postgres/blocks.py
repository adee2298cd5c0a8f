"""Block rows: writing a batch with COPY and reading rows back as :class:`MemoryBlock` values."""

from __future__ import annotations

import json
from collections.abc import Sequence

from memlane.core.model import MemoryBlock
from memlane.core.store.postgres.keys import Conn
from memlane.core.timefmt import to_epoch

_BLOCK_COPY = (
    "COPY blocks (user_id, pk, id, conversation_id, session_id, exchange_index, perspective, mode, message, summary, "
    "contexts, message_ids, event_ts, ingest_ts, time_annotation, extraction_status, extraction_prompt, content_hash, "
    "annotations) FROM STDIN"
)

# Cross-table consistency, each a count of rows that should not exist (PostgresStore.integrity_check).
INTEGRITY_CHECKS = {
    "search keys without a vector": "SELECT count(*) FROM search_keys k WHERE NOT EXISTS "
    "(SELECT 1 FROM key_vectors v WHERE v.user_id = k.user_id AND v.key_pk = k.pk)",
    "vectors without a search key": "SELECT count(*) FROM key_vectors v WHERE NOT EXISTS "
    "(SELECT 1 FROM search_keys k WHERE k.user_id = v.user_id AND k.pk = v.key_pk)",
    "jobs without a block": "SELECT count(*) FROM jobs j WHERE NOT EXISTS "
    "(SELECT 1 FROM blocks b WHERE b.user_id = j.user_id AND b.pk = j.block_pk)",
    "rows of unknown users": "SELECT (SELECT count(*) FROM key_vectors v WHERE NOT EXISTS "
    "(SELECT 1 FROM users u WHERE u.id = v.user_id)) + (SELECT count(*) FROM jobs j WHERE NOT EXISTS "
    "(SELECT 1 FROM users u WHERE u.id = j.user_id))",
    "users whose BM25 counters are off": "SELECT count(*) FROM users u WHERE (u.n_keys, u.total_len) <> "
    "(SELECT count(*), coalesce(sum(dl), 0) FROM search_keys k WHERE k.user_id = u.id)",
}


def copy_blocks(conn: Conn, user_id: int, pks: Sequence[int], blocks: Sequence[MemoryBlock]) -> None:
    """Write blocks (with their pre-allocated pks) in one COPY: one round trip for a whole batch."""
    with conn.cursor() as cur, cur.copy(_BLOCK_COPY) as copy:
        for pk, b in zip(pks, blocks, strict=True):
            copy.write_row(
                (
                    user_id, pk, b.id, b.conversation_id, b.session_id, b.exchange_index, b.perspective,
                    b.mode.value, b.message, b.summary, json.dumps(list(b.contexts)),
                    json.dumps(list(b.message_ids)), to_epoch(b.event_time), to_epoch(b.ingest_time),
                    b.time_annotation, b.extraction_status.value, b.extraction_prompt, b.content_hash,
                    json.dumps(b.annotations, sort_keys=True),
                )
            )  # fmt: skip
