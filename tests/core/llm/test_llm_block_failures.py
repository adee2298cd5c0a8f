"""Whose failure is it, the endpoint's or the block's? (docs/design/002-extraction-queue.md, "Whose failure")

An LLM that answers 500 fails the block: after its attempts (3) it is ``extraction_failed``, its
``fail_count`` 3, re-queueable. A rate limit, an overload or a timeout on every request is the endpoint's:
the queue waits and no attempt is used, however long it lasts. The same failure persisting for one block
while the endpoint serves the others is that block's. On every store."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakeserver import FAKE_API_KEY, FAKE_MODEL, FakeChatServer, Reply

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.extraction.worker import Worker, WorkerStats
from memlane.core.llm import LLMSettings, OpenAIChatClient
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store

POISON = "XQ-poison-QX"
ENDPOINT_FAILURES = {
    "429": Reply(status=429, headers={"Retry-After": "0"}),
    "503": Reply(status=503),
    "timeout": Reply(delay_s=1.0),
}


def extraction(body: dict[str, Any]) -> str:
    first = body["messages"][-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"About {first}", "facts": [first]})


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    """Extracts every block; its ``failure``, once set, answers the requests about the poison block."""
    with FakeChatServer() as s:
        s.responder = extraction
        s.failing = lambda body: POISON in json.dumps(body["messages"])
        yield s


def memory(store: Store, server: FakeChatServer, *texts: str) -> tuple[Memory, list[str]]:
    """A memory whose blocks (one per text, queued for extraction) get 3 attempts; one request per try."""
    settings = LLMSettings(model=FAKE_MODEL, api_key=FAKE_API_KEY, base_url=server.url, timeout_s=0.3, max_retries=0)
    mem = Memory(store, HashingEmbedder(), llm=OpenAIChatClient(settings), max_attempts=3)
    ids = [mem.add_facts("alice", [t], extract="async").block_ids[0] for t in texts]
    return mem, ids


def work(mem: Memory, until: Callable[[], bool], seconds: float = 30.0) -> WorkerStats:
    """A worker, as memlane serve runs one, with no waits between tries, until ``until()`` holds."""
    w = Worker(
        mem.queue,
        mem.extractor(),
        mem.embedder,
        concurrency=1,
        poll_s=0.01,
        outage_in=lambda _n: 0.0,
        pause_in=lambda _n: 0.0,
        retry_in=lambda _a: 0.0,
    )
    thread = threading.Thread(target=w.run)
    thread.start()
    deadline = time.monotonic() + seconds
    try:
        while not until() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        w.stop()
        thread.join()
    return w.stats


def states(mem: Memory, ids: list[str]) -> list[tuple[str, int]]:
    return [(b.status, b.fail_count) for b in (mem.get("alice", i) for i in ids)]


def test_an_llm_that_keeps_answering_500_fails_each_block_after_its_attempts(
    store_factory: Any, server: FakeChatServer
) -> None:
    server.failure, server.failing = Reply(status=500), None
    mem, ids = memory(store_factory(), server, "likes tea", "lives in Lisbon")
    try:
        stats = work(mem, lambda: mem.queue_status(recent_errors=0).pending == 0)
        assert states(mem, ids) == [("extraction_failed", 3)] * 2
        assert (stats.dead, stats.retried, stats.waited) == (2, 4, 0)
        assert mem.queue_status(recent_errors=0).llm_outage is None
        assert mem.requeue().dead == 2 and states(mem, ids) == [("processing", 3)] * 2  # re-queueable
        server.failure = None
        work(mem, lambda: mem.queue_status(recent_errors=0).pending == 0)
        assert [s for s, _ in states(mem, ids)] == ["ready", "ready"]
    finally:
        mem.close()


@pytest.mark.parametrize("failure", ENDPOINT_FAILURES)
def test_a_failure_on_every_request_waits_without_using_attempts(
    store_factory: Any, server: FakeChatServer, failure: str
) -> None:
    server.failure, server.failing = ENDPOINT_FAILURES[failure], None
    mem, ids = memory(store_factory(), server, "likes tea", "lives in Lisbon")
    try:
        stats = work(mem, lambda: server.count >= 12)  # six tries a block, twice the attempts it has
        assert stats.dead == stats.retried == 0 and stats.waited >= 10
        assert states(mem, ids) == [("processing", 0)] * 2
        outage = mem.queue_status(recent_errors=0).llm_outage
        assert outage is not None and outage.jobs == 2
        server.failure = None  # the endpoint is back
        work(mem, lambda: mem.queue_status(recent_errors=0).pending == 0)
        assert states(mem, ids) == [("ready", 0)] * 2
    finally:
        mem.close()


@pytest.mark.parametrize("failure", ENDPOINT_FAILURES)
def test_a_failure_that_persists_for_one_block_while_others_are_served_fails_it(
    store_factory: Any, server: FakeChatServer, failure: str
) -> None:
    server.failure = ENDPOINT_FAILURES[failure]
    mem, ids = memory(store_factory(), server, f"the {POISON} block", "likes tea", "lives in Lisbon", "has a cat")
    try:
        stats = work(mem, lambda: mem.queue_status(recent_errors=0).pending == 0)
        assert states(mem, ids) == [("extraction_failed", 3)] + [("ready", 0)] * 3
        assert (stats.done, stats.dead) == (3, 1)
        # Its first failure was the endpoint's as far as anyone could tell: waited for, then charged 3 times.
        assert sum(POISON in json.dumps(r.body) for r in server.requests) == 4
    finally:
        mem.close()
