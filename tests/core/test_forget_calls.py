"""Deleting a block, a user or expired blocks deletes their LLM calls from the call log, by user and block id,
through every path of the Python API, whatever prompt made the calls, and with ``Memory.open``'s default
call log (``STORE.calls.db``) even when another process made it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane.core.calls import default_call_log_path
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError
from memlane.core.extraction.extractor import ExtractionPrompt
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.llm.calllog import CallEntry, cache_key, prompt_hash, request_json
from memlane.core.memory import Memory
from memlane.core.retention import RetentionPolicy
from memlane.core.store.sqlite import SqliteStore

T0 = datetime(2024, 1, 1, 12, tzinfo=UTC)


def chat(user: str, word: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{user} says {word}."}, {"role": "assistant", "content": f"Noted: {word}."}]


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def words_in(log: CallLog) -> str:
    """Everything the call log's rows hold, as one text."""
    return " ".join(f"{r.namespace} {r.block_id} {r.request} {r.response}" for r in log.list(10_000))


def writer(path: Path, log: CallLog, prompt: ExtractionPrompt | None = None) -> Memory:
    """A memory that extracts with the scripted LLM into ``log`` (as a worker or `memlane add --extract sync`
    in another process would)."""
    return Memory(
        SqliteStore(path), HashingEmbedder(), llm=ScriptedLLM(reply, call_log=log), call_log=log, prompt=prompt
    )


def test_every_extraction_call_carries_its_user_and_block(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "m.db.calls.db")
    mem = writer(tmp_path / "m.db", log)
    try:
        res = mem.add("erin", chat("erin", "quasar"), extract="sync")
        assert sorted((r.namespace, r.block_id, r.purpose) for r in log.list(10)) == sorted(
            ("erin", b, "extract") for b in res.block_ids
        )
    finally:
        mem.close()
        log.close()


def test_open_finds_the_call_log_beside_the_store_for_every_delete(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    log = CallLog(default_call_log_path(path))  # made by "another process": not given to the memory below
    other = writer(path, log)
    kept = other.add("erin", chat("erin", "keepsake"), extract="sync", time=T0 + timedelta(days=30))
    gone = other.add("erin", chat("erin", "quasar"), extract="sync", time=T0)
    other.add("erin", chat("erin", "nebula"), extract="sync", time=T0 - timedelta(days=30))
    other.add("fay", chat("fay", "pulsar"), extract="sync")
    other.close()
    assert all(w in words_in(log) for w in ("keepsake", "quasar", "nebula", "pulsar"))

    mem = Memory.open(path, embedder="hashing")  # the default: the call log beside the store
    try:
        mem.delete("erin", gone.block_ids[0])
        text = words_in(log)
        assert gone.block_ids[0] not in text and gone.block_ids[1] in text  # only that perspective's calls
        mem.delete("erin", gone.block_ids[1])
        assert "quasar" not in words_in(log)
        mem.set_retention("erin", RetentionPolicy(max_age_days=10))
        assert mem.apply_retention(now=T0 + timedelta(days=31)).expired == 2
        assert "nebula" not in words_in(log) and "keepsake" in words_in(log)
        mem.delete_user("erin")
        assert {r.namespace for r in log.list(100)} == {"fay"}
        assert kept.block_ids[0] not in words_in(log)
    finally:
        mem.close()
        log.close()


def test_a_call_log_made_after_open_is_found_by_the_delete(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    mem = Memory.open(path, embedder="hashing")  # no call log exists yet: none is created
    try:
        assert not default_call_log_path(path).exists()
        log = CallLog(default_call_log_path(path))
        other = writer(path, log)
        other.add("erin", chat("erin", "quasar"), extract="sync")
        other.close()
        mem.delete_user("erin")
        assert log.list(10) == []
        log.close()
    finally:
        mem.close()
    assert mem.call_log is None  # the memory closed the call log it opened


def test_calls_are_deleted_by_block_id_whatever_prompt_made_them(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    log = CallLog(tmp_path / "calls.db")
    custom = ExtractionPrompt("custom-v1", "Remember for {perspective} what {speakers} said at {time}.")
    other = writer(path, log, prompt=custom)
    res = other.add("erin", chat("erin", "quasar"), extract="sync")
    other.close()
    # Deleted by a memory that extracts with another prompt (the default): re-rendering its prompt for the
    # block would find none of the calls.
    mem = Memory.open(path, embedder="hashing", call_log=log, llm=ScriptedLLM(reply, call_log=log))
    try:
        assert mem.prompt.prompt_id != custom.prompt_id
        mem.delete("erin", res.block_ids[0])
        mem.delete("erin", res.block_ids[1])
        assert log.list(10) == []
    finally:
        mem.close()
        log.close()


def test_calls_logged_before_block_ids_are_found_by_the_exchange_they_sent(tmp_path: Path) -> None:
    """A call log of an older memlane: rows without a block id, the exchange sent as the user message."""
    log = CallLog(tmp_path / "calls.db")
    mem = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder(), call_log=log)
    try:
        block, other = (mem.add("erin", chat("erin", w)).block_ids[0] for w in ("quasar", "pulsar"))
        for block_id in (block, other):
            message = mem.get("erin", block_id).message
            sent: list[ChatMessage] = [
                {"role": "system", "content": "an old prompt"},
                {"role": "user", "content": f"{message}\n\nReply with JSON."},  # the client's instruction after it
            ]
            request = request_json("openai", "m", sent, {"kind": "json"})
            entry = CallEntry("m", "extract", "erin", prompt_hash(sent), cache_key(request), request, "{}",
                              1, 1, 1.0, None, 1, False, 0)  # fmt: skip
            log.record(replace(entry, block_id=None))
        mem.delete("erin", block)
        assert [r.request for r in log.list(10) if "quasar" in r.request] == []
        assert len(log.list(10)) == 1 and "pulsar" in log.list(10)[0].request
    finally:
        mem.close()
        log.close()


def test_a_delete_that_failed_halfway_can_be_repeated(tmp_path: Path) -> None:
    """The store deleted, the call log not (yet): deleting again (NotFoundError) deletes what is left."""
    path = tmp_path / "m.db"
    log = CallLog(tmp_path / "calls.db")
    other = writer(path, log)
    res = other.add("erin", chat("erin", "quasar"), extract="sync")
    other.store.delete_block("erin", res.block_ids[0])  # the store's part only
    other.store.delete_user("erin")
    other.close()
    mem = Memory.open(path, embedder="hashing", call_log=log)
    try:
        with pytest.raises(NotFoundError):
            mem.delete("erin", res.block_ids[0])
        assert {r.block_id for r in log.list(10)} == {res.block_ids[1]}
        with pytest.raises(NotFoundError):
            mem.delete_user("erin")
        assert log.list(10) == []
    finally:
        mem.close()
        log.close()


def test_the_workers_sweep_deletes_calls_of_expired_blocks(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.db")
    mem = writer(tmp_path / "m.db", log)
    try:
        now = datetime.now(UTC)
        mem.add("erin", chat("erin", "nebula"), extract="sync", time=now - timedelta(days=40))
        mem.add("erin", chat("erin", "keepsake"), extract="sync", time=now)
        mem.set_retention(None, RetentionPolicy(max_age_days=30))
        worker = mem.worker(retention_every_s=3600)
        assert worker.sweep is not None
        worker.sweep()  # what the worker (and `memlane serve`'s) runs on its schedule
        assert "nebula" not in words_in(log) and "keepsake" in words_in(log)
    finally:
        mem.close()
        log.close()
