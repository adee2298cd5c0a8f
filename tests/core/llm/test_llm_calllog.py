"""The SQLite call log on a real file: records, cache lookup, namespaces, stats, migrations, threads."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memlane.core.errors import StoreError
from memlane.core.llm.calllog import MIGRATIONS, CallEntry, CallLog, cache_key, prompt_hash, request_json
from memlane.core.llm.protocol import ChatMessage

MESSAGES: list[ChatMessage] = [{"role": "user", "content": "hello"}]
REQUEST = request_json("openai", "m", MESSAGES, {"kind": "text", "temperature": 0.0})


def entry(**changes: Any) -> CallEntry:
    base = CallEntry(
        model="m",
        purpose="extract",
        namespace="alice",
        prompt_hash=prompt_hash(MESSAGES),
        cache_key=cache_key(REQUEST),
        request=REQUEST,
        response="hi",
        tokens_in=10,
        tokens_out=2,
        latency_ms=12.5,
        error=None,
        attempts=1,
        cached=False,
        ignored_keys=0,
    )
    return replace(base, **changes)


def test_record_and_list_round_trip(call_log: CallLog) -> None:
    first = call_log.record(entry())
    second = call_log.record(entry(namespace=None, cached=True))
    records = call_log.list(10)
    assert [r.id for r in records] == [second, first]  # newest first
    assert records[1].response == "hi" and records[1].cached is False and records[0].cached is True
    assert records[0].namespace is None
    assert records[1].created_at.tzinfo is not None
    assert call_log.list(1)[0].id == second


def test_cache_key_is_the_hash_of_the_logged_request() -> None:
    other = request_json("openai", "m", MESSAGES, {"temperature": 0.0, "kind": "text"})
    assert other == REQUEST  # key order does not matter
    assert cache_key(REQUEST) != cache_key(request_json("openai", "m2", MESSAGES, {"kind": "text"}))
    assert len(prompt_hash(MESSAGES)) == 64


def test_lookup_serves_only_successful_uncached_rows(call_log: CallLog) -> None:
    key = cache_key(REQUEST)
    call_log.record(entry(error="LLMTransportError: boom", response=None))
    call_log.record(entry(cached=True))
    assert call_log.lookup(key) is None
    ok = call_log.record(entry(response="served"))
    found = call_log.lookup(key)
    assert found is not None and found.id == ok and found.response == "served"
    assert call_log.lookup("0" * 64) is None


def test_delete_namespace(call_log: CallLog) -> None:
    call_log.record(entry(namespace="alice"))
    call_log.record(entry(namespace="alice", cached=True))
    call_log.record(entry(namespace="bob"))
    call_log.record(entry(namespace=None))
    assert call_log.delete_namespace("alice") == 2
    assert call_log.delete_namespace("alice") == 0
    assert sorted(str(r.namespace) for r in call_log.list(10)) == ["None", "bob"]


def test_stats_count_spent_tokens_only(call_log: CallLog) -> None:
    assert call_log.stats().calls == 0
    call_log.record(entry(tokens_in=10, tokens_out=2, latency_ms=10.0))
    call_log.record(entry(tokens_in=10, tokens_out=2, latency_ms=1.0, cached=True))
    call_log.record(entry(tokens_in=None, tokens_out=None, latency_ms=30.0, error="x", response=None))
    stats = call_log.stats()
    assert (stats.calls, stats.cache_hits, stats.errors) == (3, 1, 1)
    assert (stats.tokens_in, stats.tokens_out, stats.mean_latency_ms) == (10, 2, 20.0)


def test_reopen_keeps_rows_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "calls.sqlite"
    with CallLog(path) as log:
        log.record(entry())
    with CallLog(path) as log:
        assert len(log.list(10)) == 1
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer than this code"):
        CallLog(path)


def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(StoreError, match="cannot open"):
        CallLog(tmp_path / "file" / "calls.sqlite")


def test_threads_share_one_log(call_log: CallLog) -> None:
    def work(i: int) -> None:
        for _ in range(25):
            call_log.record(entry(namespace=f"user{i}"))
            call_log.lookup(cache_key(REQUEST))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert call_log.stats().calls == 100


OPEN_AND_RECORD = """
import sys, time
from memlane.core.llm.calllog import CallEntry, CallLog
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
log = CallLog(__import__("pathlib").Path(sys.argv[1]))
log.record(CallEntry("m", "p", None, "h", "k", "{}", "ok", 1, 1, 1.0, None, 1, False, 0))
log.close()
"""


def test_processes_opening_a_new_call_log_together_all_run(tmp_path: Path) -> None:
    """Workers started at once on a fresh call log: each one migrates it or finds it migrated (one used to exit
    with "table llm_calls already exists")."""
    for round_ in range(3):  # a few rounds: the race is lost only when two processes interleave just so
        path = tmp_path / f"calls-{round_}.db"
        start = time.time() + 2.0
        procs = [
            subprocess.Popen([sys.executable, "-c", OPEN_AND_RECORD, str(path), str(start)], stderr=subprocess.PIPE)
            for _ in range(8)
        ]
        errors = [p.communicate(timeout=60)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0] * 8, errors
        with CallLog(path) as log:
            assert log.stats().calls == 8
