"""The LLM call log of a PostgreSQL store: the ``llm_calls`` table beside the blocks (migration 10).

The SQLite store's call log is a file beside the store (:class:`memlane.core.llm.calllog.CallLog`); a
PostgreSQL store has no file to sit beside, and a call log in a file of whatever folder a process ran in was
left behind by a delete run from another folder. In the store, a call is where every process that deletes
finds it: ``delete_user`` removes the user's calls in its own transaction, and deleting blocks removes
theirs here (:mod:`memlane.core.calls`). Each row carries its user's id (0 for a call made for no user), so
on a distributed store the calls of a user lie on the user's node and go with them.

Same semantics as the file: the cache answers from the newest successful uncached call with the same key,
a cached answer is logged as a row of its own, and tokens are counted over uncached rows only.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import astuple
from typing import TYPE_CHECKING

from memlane.core.llm.calllog import ENTRY_COLUMNS, CallEntry, CallLog, CallRecord, CallStats, sent_one_of, to_record
from memlane.core.store.check import StoreCheck
from memlane.core.store.postgres.tenant import user_key

if TYPE_CHECKING:
    from memlane.core.store.postgres.base import PostgresBase

_SELECT = f"SELECT {', '.join(ENTRY_COLUMNS)}, id, created_at FROM llm_calls"


class StoreCallLog(CallLog):
    """The call log in a PostgreSQL store's ``llm_calls`` table, on the store's connection pool (closing it
    leaves the store open)."""

    def __init__(self, store: PostgresBase) -> None:
        # Not the file's set-up: the table is the store's, made by its migrations.
        self.store = store
        self.path = None

    def record(self, entry: CallEntry) -> int:
        values = astuple(entry)
        row = self.store.query(
            f"INSERT INTO llm_calls (user_id, {', '.join(ENTRY_COLUMNS)}, created_at) "
            f"VALUES (%s, {', '.join(['%s'] * len(ENTRY_COLUMNS))}, extract(epoch FROM now())) RETURNING id",
            (_owner(entry.namespace), *values),
        )
        return int(row[0][0])

    def lookup(self, key: str) -> CallRecord | None:
        rows = self.store.query(
            f"{_SELECT} WHERE cache_key = %s AND error IS NULL AND NOT cached ORDER BY id DESC LIMIT 1", (key,)
        )
        return to_record(rows[0]) if rows else None

    def list(self, n: int = 20) -> builtins.list[CallRecord]:
        return [to_record(r) for r in self.store.query(f"{_SELECT} ORDER BY id DESC LIMIT %s", (n,))]

    def delete_namespace(self, namespace: str) -> int:
        with self.store.transaction() as conn:
            return int(
                conn.execute(
                    "DELETE FROM llm_calls WHERE user_id = %s AND namespace = %s", (_owner(namespace), namespace)
                ).rowcount
            )

    def delete_blocks(self, namespace: str, blocks: Mapping[str, str | None]) -> int:
        """As :meth:`CallLog.delete_blocks`: by block id, and a call of the user without one by the block's
        message it sent."""
        if not blocks:
            return 0
        owner = _owner(namespace)
        texts = {text for text in blocks.values() if text}
        with self.store.transaction() as conn:
            n = int(
                conn.execute(
                    "DELETE FROM llm_calls WHERE user_id = %s AND namespace = %s AND block_id = ANY(%s)",
                    (owner, namespace, list(blocks)),
                ).rowcount
            )
            if texts:
                unlabelled = conn.execute(
                    "SELECT id, request FROM llm_calls WHERE user_id = %s AND namespace = %s AND block_id IS NULL",
                    (owner, namespace),
                ).fetchall()
                doomed = [int(i) for i, request in unlabelled if sent_one_of(str(request), texts)]
                if doomed:
                    n += int(
                        conn.execute(
                            "DELETE FROM llm_calls WHERE user_id = %s AND id = ANY(%s)", (owner, doomed)
                        ).rowcount
                    )
        return n

    def checkpoint(self) -> bool:
        """Nothing to do: a deleted row's words are in the database's own files, which the store's
        documentation covers (docs/postgres.md)."""
        return True

    def stats(self) -> CallStats:
        row = self.store.query(
            "SELECT count(*), count(*) FILTER (WHERE cached), count(error), "
            "coalesce(sum(tokens_in) FILTER (WHERE NOT cached), 0), "
            "coalesce(sum(tokens_out) FILTER (WHERE NOT cached), 0), "
            "coalesce(avg(latency_ms) FILTER (WHERE NOT cached), 0.0), "
            "coalesce(sum(ignored_keys) FILTER (WHERE NOT cached), 0) FROM llm_calls"
        )[0]
        calls, hits, errors, t_in, t_out, latency, ignored = row
        return CallStats(int(calls), int(hits), int(errors), int(t_in), int(t_out), float(latency), int(ignored))

    def check(self) -> StoreCheck:
        """The call log is a table of the store: the store's check covers it."""
        return self.store.check(quick=True)

    def close(self) -> None:
        """Nothing to close: the store owns the connections."""


def _owner(namespace: str | None) -> int:
    return 0 if namespace is None else user_key(namespace)
