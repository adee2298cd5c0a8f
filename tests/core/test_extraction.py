"""Extraction: the outbox queue, leases fenced by owner, retries to dead, facts as search keys."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ConfigError
from memlane.core.extraction.extractor import EXTRACTION_SCHEMA, ExtractionPrompt
from memlane.core.jobs import JobStatus
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import ExtractionStatus
from memlane.core.store.sqlite import SqliteStore


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def extraction_reply(messages: Sequence[ChatMessage]) -> str:
    """A deterministic 'LLM': the summary names the exchange, one fact per user sentence, plus a marker."""
    exchange = messages[-1]["content"]
    first = exchange.splitlines()[0].split(": ", 1)[1]
    return json.dumps({"summary": f"Summary of: {first}", "facts": [f"Fact: {first}", "zebracorn marker"]})


def make_memory(tmp_path: Path, name: str, llm: ScriptedLLM | None = None, **kw: Any) -> Memory:
    return Memory(SqliteStore(tmp_path / f"{name}.db"), HashingEmbedder(), llm=llm, **kw)


def sql(mem: Memory, query: str) -> list[Any]:
    assert isinstance(mem.store, SqliteStore)
    return mem.store.query(query)


def stored(mem: Memory, user: str) -> list[tuple[str, str | None, tuple[str, ...], str, str | None]]:
    return [
        (b.message, b.summary, b.contexts, b.extraction_status.value, b.extraction_prompt)
        for b in mem.list(user, limit=1000)
    ]


def test_async_enqueues_in_the_add_and_blocks_are_searchable_at_once(tmp_path: Path) -> None:
    mem = make_memory(tmp_path, "a")
    res = mem.add("alice", chat("I adopted a cat named Miso", "Lovely!"), extract="async")
    assert res.jobs_enqueued == 2  # dual mode: one job per block
    st = mem.queue_status()
    assert (st.queued, st.running, st.done, st.dead) == (2, 0, 0, 0)
    hits = mem.search("alice", "cat Miso", k=5, distinct=False)
    assert len(hits) == 2 and all(h.block.extraction_status is ExtractionStatus.QUEUED for h in hits)
    assert all(h.block.summary is None and h.block.contexts == () for h in hits)


def test_sync_and_async_store_identical_results(tmp_path: Path) -> None:
    convo = chat("I moved to Ghent in May", "Nice", "My sister Ana is a pilot", "Cool job")
    sync_mem = make_memory(tmp_path, "sync", ScriptedLLM(extraction_reply))
    sync_mem.add("alice", convo, extract="sync")
    async_mem = make_memory(tmp_path, "async", ScriptedLLM(extraction_reply))
    async_mem.add("alice", convo, extract="async")
    assert async_mem.queue_status().queued == 4
    stats = async_mem.worker(concurrency=3, poll_s=0.01).run(drain=True)
    assert (stats.done, stats.dead, stats.lost) == (4, 0, 0)
    assert stored(sync_mem, "alice") == stored(async_mem, "alice")
    (_, summary, facts, status, prompt) = stored(sync_mem, "alice")[0]
    assert summary == "Summary of: I moved to Ghent in May"
    assert facts == ("Fact: I moved to Ghent in May", "zebracorn marker")
    assert status == "done"
    assert prompt == ExtractionPrompt.load().ref and len(prompt.split("@")[1]) == 64


def test_facts_are_search_keys_and_can_be_turned_off(tmp_path: Path) -> None:
    mem = make_memory(tmp_path, "f", ScriptedLLM(extraction_reply))
    mem.add("alice", chat("We talked about nothing much", "Indeed"), extract="sync", perspective="single")
    mem.add("alice", chat("Another plain exchange", "Yes"), perspective="single")
    hits = mem.search("alice", "zebracorn", k=5, mode="keyword")
    assert len(hits) == 1 and hits[0].block.contexts[-1] == "zebracorn marker"
    assert mem.search("alice", "zebracorn", k=5, mode="keyword-messages") == []
    vec = mem.search("alice", "zebracorn marker", k=2, mode="vector")
    assert vec[0].block.summary is not None  # the fact key wins the vector search
    # One block per hit even though the block owns three keys that match.
    assert len({h.block.id for h in mem.search("alice", "plain exchange nothing", k=10)}) == 2


def test_failed_jobs_retry_then_die_with_the_error_kept(tmp_path: Path) -> None:
    replies = iter(["not json at all"] * 100)
    llm = ScriptedLLM(lambda _m: next(replies))
    mem = make_memory(tmp_path, "d", llm, max_attempts=3)
    res = mem.add("alice", chat("hello there", "hi"), extract="async", perspective="single")
    outcome = mem.run_jobs([1], retry_pause_s=0.0)
    assert outcome == {1: JobStatus.DEAD}
    st = mem.queue_status()
    assert (st.dead, st.queued) == (1, 0)
    assert "LLMResponseError" in st.last_errors[0].error and st.last_errors[0].attempts == 3
    raw = sql(mem, "SELECT raw_response FROM jobs WHERE id = 1")[0][0]
    assert raw == "not json at all"
    block = mem.get("alice", res.block_ids[0])
    assert block.extraction_status is ExtractionStatus.FAILED
    assert mem.search("alice", "hello there", k=1)[0].block.id == block.id  # still searchable


def test_transport_errors_are_retried_by_the_queue(tmp_path: Path) -> None:
    llm = ScriptedLLM(extraction_reply, fail_on={1: "transport", 2: "invalid_json"})
    mem = make_memory(tmp_path, "t", llm)
    res = mem.add("alice", chat("one", "two"), extract="sync", perspective="single")
    # An unreachable server (the client has already retried it) ends the synchronous run at once: the job
    # stays queued for a worker instead of being tried again against a server that is down.
    assert (res.jobs_enqueued, res.jobs_done, res.jobs_failed) == (1, 0, 0)
    st = mem.queue_status()
    assert (st.queued, st.dead) == (1, 0) and "LLMTransportError" in st.last_errors[0].error
    # The outage did not use up an attempt: the job waits for the LLM (with a backoff), and says so.
    assert sql(mem, "SELECT attempts, llm_failures FROM jobs") == [(0, 1)]
    assert st.llm_outage is not None and st.llm_outage.jobs == 1 and st.llm_outage.next_try_in_s > 0
    assert mem.requeue(dead_only=False).waiting == 1  # run it now, instead of after the backoff
    assert mem.run_jobs([1], retry_pause_s=0.0) == {1: JobStatus.DONE}  # what a worker does later
    assert mem.queue_status().done == 1
    assert mem.list("alice")[0].summary == "Summary of: one"
    # A job that ends done is not listed among the errors, but keeps its history.
    assert mem.queue_status().last_errors == () and mem.queue_status().llm_outage is None
    row = sql(mem, "SELECT attempts, last_error, llm_failures FROM jobs")[0]
    assert row[0] == 2 and "LLMResponseError" in row[1] and row[2] == 0  # the bad reply's attempt, and this one


def test_a_worker_that_lost_its_lease_writes_nothing(tmp_path: Path) -> None:
    mem = make_memory(tmp_path, "l", ScriptedLLM(extraction_reply))
    mem.add("alice", chat("fenced exchange", "ok"), extract="async", perspective="single")
    slow = mem.queue.claim("worker-slow", 1, lease_s=-1.0)[0]  # its lease is already over
    fast = mem.queue.claim("worker-fast", 1, lease_s=60.0)[0]  # so the job is redelivered
    assert fast.job_id == slow.job_id and fast.attempts == 2
    from memlane.core.extraction.worker import run_job

    assert run_job(fast, mem.queue, mem.extractor(), mem.embedder) is JobStatus.DONE
    assert run_job(slow, mem.queue, mem.extractor(), mem.embedder) is None
    assert mem.queue.fail(slow, "late", None, 0.0) is None
    writes = sql(mem, "SELECT extraction_writes FROM blocks")
    assert writes == [(1,)]
    keys = sql(mem, "SELECT kind, count(*) FROM search_keys GROUP BY kind ORDER BY kind")
    assert keys == [("fact", 2), ("message", 1), ("summary", 1)]


def test_sync_needs_an_llm(tmp_path: Path) -> None:
    mem = make_memory(tmp_path, "n")
    with pytest.raises(ConfigError, match="needs an LLM"):
        mem.add("alice", chat("x"), extract="sync")
    assert mem.list("alice") == []


def test_delete_user_removes_jobs_and_llm_calls(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.db")
    mem = make_memory(tmp_path, "u", ScriptedLLM(extraction_reply, call_log=log), call_log=log)
    mem.add("alice", chat("alice text", "ok"), extract="sync")
    mem.add("bob", chat("bob text", "ok"), extract="sync")
    assert {r.namespace for r in log.list(100)} == {"alice", "bob"}
    mem.delete_user("alice")
    assert {r.namespace for r in log.list(100)} == {"bob"}
    assert mem.store.user_row_counts("alice")["jobs"] == 0
    assert mem.queue_status().done == 2  # bob's jobs stay


def test_schema_is_the_documented_shape() -> None:
    assert EXTRACTION_SCHEMA["required"] == ["summary", "facts"]
    prompt = ExtractionPrompt.load()
    assert prompt.prompt_id == "extract-v1" and "{time}" in prompt.template
