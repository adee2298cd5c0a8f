"""A block's extraction status on every backend (docs/design/007-memory-model.md): an update queues its
extraction again, a failed block says so and is requeued by hand."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from store_samples import drain, reply

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import (
    NotFoundError,
    ValidationError,
)
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import ExtractionStatus
from memlane.core.store.protocol import Store

StoreFactory = Callable[[], Store]


def test_update_requeues_extraction_and_clears_the_old_one(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(reply))
    if not hasattr(mem.store, "create_session"):
        pytest.skip("this store does not implement the memory model yet")
    try:
        fact = mem.add_facts("alice", ["Alice studies volcanoes"], extract="sync").block_ids[0]
        assert mem.get("alice", fact).contexts == ("Fact from Alice studies volcanoes",)
        queued = mem.update("alice", fact, content="Alice studies glaciers")
        assert queued.summary is None and queued.contexts == () and queued.status == "processing"
        assert queued.last_queued_at is not None
        assert mem.queue_status().queued == 1
        drain(mem)
        done = mem.get("alice", fact)
        assert done.contexts == ("Fact from Alice studies glaciers",) and done.status == "ready"
        for mode in ("vector", "keyword", "hybrid"):
            assert all("volcano" not in json.dumps([h.block.message, h.block.contexts, h.block.summary])
                       for h in mem.search("alice", "volcanoes", k=5, mode=mode))  # fmt: skip
        off = mem.update("alice", fact, content="Alice studies deserts", extract="off")
        assert off.extraction_status is ExtractionStatus.OFF and mem.queue_status().queued == 0
    finally:
        mem.close()


def test_a_failed_block_reports_its_status_and_is_requeued_by_hand(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM("not json"), max_attempts=1)
    if not hasattr(mem.store, "create_session"):
        pytest.skip("this store does not implement the memory model yet")
    try:
        res = mem.add_facts("alice", ["Alice collects stamps"], extract="sync")
        assert res.jobs_failed == 1
        block = mem.get("alice", res.block_ids[0])
        assert block.status == "extraction_failed" and block.fail_count == 1 and block.last_queued_at is not None
        with pytest.raises(ValidationError) as err:
            mem.requeue_block("alice", mem.add_facts("alice", ["other"]).block_ids[0])
        assert err.value.where == "block_id"
        again = mem.requeue_block("alice", block.id)
        assert again.status == "processing" and again.last_queued_at is not None
        assert again.last_queued_at >= block.last_queued_at and mem.queue_status().queued == 1
        mem.llm = ScriptedLLM(reply)
        drain(mem)
        done = mem.get("alice", block.id)
        assert done.status == "ready" and done.fail_count == 1 and done.contexts
        with pytest.raises(NotFoundError):
            mem.requeue_block("bob", block.id)
    finally:
        mem.close()
