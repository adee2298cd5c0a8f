"""Every LLM call in one SQLite table, which is also the response cache.

Cache semantics: a call whose ``cache_key`` matches an earlier *successful*, *uncached* row is answered
from that row without a request, and logged as a row of its own with ``cached = 1`` (so the log still shows
every call, with its purpose and namespace). Such a row copies the token counts of the row it was served
from, but :meth:`CallLog.stats` counts tokens of uncached rows only, which is what was spent. Rows with an
``error`` are never served. The key is the SHA-256 of the ``request`` column: the canonical JSON of
provider, model, the caller's messages and the parameters (kind, schema, temperature, max_tokens). The
namespace is not part of the key: the same prompt gets the same reply for every user.

The file has its own connection (WAL, autocommit, busy timeout) and a lock, so threads can share it.
Schema changes are appended to ``MIGRATIONS`` and never edited once released (``PRAGMA user_version``).

Deleting is the other half of keeping a log of people's words: a call made for a memory block carries the
block's id (``block_id``), and :meth:`CallLog.delete_blocks` deletes a user's calls by block id, whatever
prompt made them. Deleted rows are overwritten in the file (``secure_delete``), and every delete ends with
a truncating checkpoint of the write-ahead log, so the words are in neither file afterwards.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from memlane.core.errors import StoreError
from memlane.core.llm.protocol import ChatMessage
from memlane.core.store.check import StoreCheck
from memlane.core.store.sqlite.maintenance import sqlite_check, truncate_wal
from memlane.core.store.sqlite.probe import sqlite_reason

log = logging.getLogger("memlane.llm")
BUSY_TIMEOUT_MS = 5000
# The write-ahead log is cut back to this size after a checkpoint: what a busy log grew to does not stay.
JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024
# How long a checkpoint after a delete waits for readers of older snapshots before it gives up (it is then
# left to the next one; the delete itself is done).
CHECKPOINT_WAIT_MS = 2000

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            model TEXT NOT NULL,
            purpose TEXT NOT NULL DEFAULT '',
            namespace TEXT,
            prompt_hash TEXT NOT NULL,
            cache_key TEXT NOT NULL,
            request TEXT NOT NULL,
            response TEXT,
            tokens_in INTEGER,
            tokens_out INTEGER,
            latency_ms REAL NOT NULL,
            error TEXT,
            attempts INTEGER NOT NULL,
            cached INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX llm_calls_cache ON llm_calls (cache_key) WHERE error IS NULL AND cached = 0",
        "CREATE INDEX llm_calls_namespace ON llm_calls (namespace)",
    ),
    # How many properties of a JSON reply were outside the schema and dropped (the reply was kept).
    ("ALTER TABLE llm_calls ADD COLUMN ignored_keys INTEGER NOT NULL DEFAULT 0",),
    # The memory block a call was made for (extraction), so that deleting the block deletes its calls
    # whatever prompt made them. Rows logged before have none (see CallLog.delete_blocks).
    (
        "ALTER TABLE llm_calls ADD COLUMN block_id TEXT",
        "CREATE INDEX llm_calls_block ON llm_calls (namespace, block_id)",
    ),
)


def canonical_json(value: object) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def prompt_hash(messages: Sequence[ChatMessage]) -> str:
    """SHA-256 of the messages alone (to find every call made with one prompt)."""
    return hashlib.sha256(canonical_json(list(messages)).encode()).hexdigest()


def request_json(provider: str, model: str, messages: Sequence[ChatMessage], params: Mapping[str, object]) -> str:
    """The canonical request text that is logged and hashed into the cache key."""
    return canonical_json({"provider": provider, "model": model, "messages": list(messages), "params": params})


def cache_key(request: str) -> str:
    """SHA-256 of a :func:`request_json` text."""
    return hashlib.sha256(request.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CallEntry:
    """One call as a provider reports it. ``response`` is the raw reply text (the last one on failure)."""

    model: str
    purpose: str
    namespace: str | None
    prompt_hash: str
    cache_key: str
    request: str
    response: str | None
    tokens_in: int | None
    tokens_out: int | None
    latency_ms: float
    error: str | None
    attempts: int
    cached: bool
    ignored_keys: int
    block_id: str | None = None  # the memory block the call was made for, if any


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord(CallEntry):
    """A logged call: the entry plus its row id and time."""

    id: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class CallStats:
    """Totals over the log. Tokens and mean latency count uncached rows only (what was spent)."""

    calls: int
    cache_hits: int
    errors: int
    tokens_in: int
    tokens_out: int
    mean_latency_ms: float
    ignored_keys: int = 0  # properties of JSON replies outside the schema, dropped (the replies were used)


ENTRY_COLUMNS = tuple(f.name for f in fields(CallEntry))
_SELECT = f"SELECT {', '.join(ENTRY_COLUMNS)}, id, created_at FROM llm_calls"


class CallLog:
    """The ``llm_calls`` table in the SQLite file at ``path`` (created with its parents if missing)."""

    path: Path | None  # the file (None: a store's own table, memlane.core.store.postgres.calllog)

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        existed = path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            # A deleted call's words are overwritten in the file, not left in its free pages.
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            if not existed:  # an empty file left by a failed creation (a full disk) would pass for a call log
                with contextlib.suppress(sqlite3.Error, OSError, AttributeError):
                    self._db.close()
                for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                    with contextlib.suppress(OSError):
                        if leftover.exists() and leftover.stat().st_size == 0:
                            leftover.unlink()
            raise StoreError(f"cannot open the LLM call log at {path}: {exc}", reason=_reason(exc)) from exc

    def _migrate(self) -> None:
        # The version is read again once the write lock is held: another process opening the same new file
        # at the same moment may have migrated it meanwhile (it then made the tables this one would make).
        while True:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
                if version > len(MIGRATIONS):
                    raise StoreError(f"{self.path} has call-log schema {version}, newer than this code knows")
                if version == len(MIGRATIONS):
                    self._db.execute("COMMIT")
                    return
                for sql in MIGRATIONS[version]:
                    self._db.execute(sql)
                self._db.execute(f"PRAGMA user_version = {version + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def record(self, entry: CallEntry) -> int:
        """Append one call; return its row id."""
        values = tuple(int(v) if isinstance(v, bool) else v for v in astuple(entry))
        sql = (
            f"INSERT INTO llm_calls ({', '.join(ENTRY_COLUMNS)}, created_at) "
            f"VALUES ({', '.join('?' * (len(ENTRY_COLUMNS) + 1))})"
        )
        with self._guard("record a call"):
            cursor = self._db.execute(sql, (*values, time.time()))
            return int(cursor.lastrowid or 0)

    def lookup(self, key: str) -> CallRecord | None:
        """The newest successful uncached call with this cache key, if any."""
        sql = f"{_SELECT} WHERE cache_key = ? AND error IS NULL AND cached = 0 ORDER BY id DESC LIMIT 1"
        with self._guard("look up the cache"):
            row = self._db.execute(sql, (key,)).fetchone()
        return None if row is None else to_record(row)

    def list(self, n: int = 20) -> builtins.list[CallRecord]:
        """The newest ``n`` calls, newest first."""
        with self._guard("list calls"):
            rows = self._db.execute(f"{_SELECT} ORDER BY id DESC LIMIT ?", (n,)).fetchall()
        return [to_record(r) for r in rows]

    def delete_namespace(self, namespace: str) -> int:
        """Delete every call made for ``namespace``; return how many rows went."""
        with self._guard("delete calls"):
            n = int(self._db.execute("DELETE FROM llm_calls WHERE namespace = ?", (namespace,)).rowcount)
        self.checkpoint()
        return n

    def delete_blocks(self, namespace: str, blocks: Mapping[str, str | None]) -> int:
        """Delete the calls made for ``namespace`` about the blocks ``blocks`` (block id -> the block's
        message, None if unknown); return how many rows went.

        A call logged with a block id is found by it, whatever prompt made it. A call logged before calls
        carried one (by an older memlane) is found by the block's message, which extraction sent as the user
        message (alone, or followed by the client's JSON instruction after a blank line), whatever the
        prompt around it; the perspectives of one exchange sent the same message, so such old calls of
        the block's other perspectives go too."""
        if not blocks:
            return 0
        ids = list(blocks)
        n = 0
        with self._guard("delete calls"):
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                n += self._db.execute(
                    f"DELETE FROM llm_calls WHERE namespace = ? AND block_id IN ({','.join('?' * len(chunk))})",
                    (namespace, *chunk),
                ).rowcount
            texts = {text for text in blocks.values() if text}
            legacy = (
                self._db.execute(
                    "SELECT id, request FROM llm_calls WHERE namespace = ? AND block_id IS NULL", (namespace,)
                ).fetchall()
                if texts
                else []
            )
            doomed = [int(row_id) for row_id, request in legacy if sent_one_of(str(request), texts)]
            for start in range(0, len(doomed), 500):
                rows = doomed[start : start + 500]
                marks = ",".join("?" * len(rows))
                n += self._db.execute(f"DELETE FROM llm_calls WHERE id IN ({marks})", rows).rowcount
        if n:
            self.checkpoint()
        return n

    def checkpoint(self) -> bool:
        """Copy the write-ahead log into the file and truncate it to nothing, so that the words of deleted
        rows are in neither file; False (logged) if a reader of an older snapshot kept it from finishing
        within :data:`CHECKPOINT_WAIT_MS` (the next checkpoint finishes it)."""
        with self._guard("checkpoint the call log"):
            done = truncate_wal(self._db, CHECKPOINT_WAIT_MS, BUSY_TIMEOUT_MS)
        if not done:
            log.warning("the LLM call log's write-ahead log could not be truncated now (a reader holds it)")
        return done

    def stats(self) -> CallStats:
        """Counts and totals over the whole log."""
        sql = """SELECT COUNT(*), COALESCE(SUM(cached), 0), COUNT(error),
                   COALESCE(SUM(CASE WHEN cached = 0 THEN tokens_in END), 0),
                   COALESCE(SUM(CASE WHEN cached = 0 THEN tokens_out END), 0),
                   COALESCE(AVG(CASE WHEN cached = 0 THEN latency_ms END), 0.0),
                   COALESCE(SUM(CASE WHEN cached = 0 THEN ignored_keys END), 0)
                 FROM llm_calls"""
        with self._guard("compute stats"):
            calls, hits, errors, t_in, t_out, latency, ignored = self._db.execute(sql).fetchone()
        return CallStats(int(calls), int(hits), int(errors), int(t_in), int(t_out), float(latency), int(ignored))

    def check(self) -> StoreCheck:
        """SQLite's integrity check of the call log's file."""
        with self._lock:
            return sqlite_check(self._db, quick=False)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> CallLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _guard(self, doing: str) -> _Guard:
        return _Guard(self._lock, f"cannot {doing} in {self.path}")


class _Guard:
    """Holds the lock and turns sqlite3 errors into StoreError."""

    def __init__(self, lock: threading.Lock, message: str) -> None:
        self._lock = lock
        self._message = message

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"{self._message}: {exc}", reason=_reason(exc)) from exc


def _reason(exc: BaseException) -> str:
    """The cause of a failure of the call log's file, in words safe to show (those of the store's file)."""
    return sqlite_reason(exc) if isinstance(exc, sqlite3.Error) else "cannot open the file"


def sent_one_of(request: str, texts: set[str]) -> bool:
    """Whether the logged ``request`` sent one of ``texts`` as a user message (alone, or followed by an
    instruction after a blank line)."""
    try:
        messages = json.loads(request).get("messages", [])
    except (ValueError, AttributeError):
        return False
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) and message.get("role") == "user" else None
        if not isinstance(content, str):
            continue
        if content in texts:
            return True
        cut = content.find("\n\n")
        while cut >= 0:
            if content[:cut] in texts:
                return True
            cut = content.find("\n\n", cut + 1)
    return False


def to_record(row: tuple[Any, ...]) -> CallRecord:
    n = len(ENTRY_COLUMNS)
    values: dict[str, Any] = dict(zip(ENTRY_COLUMNS, row[:n], strict=True))
    values["cached"] = bool(values["cached"])
    created = datetime.fromtimestamp(float(row[n + 1]), tz=UTC)
    return CallRecord(**values, id=int(row[n]), created_at=created)
