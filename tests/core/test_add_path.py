"""The add path is written once (memlane.core.ingest): messages, facts and exchanges go through the same
embed, write, jobs and result; the limits an add may carry (a per-block token limit, a full extraction
queue) are the core's, so every interface gets the same answer."""

from __future__ import annotations

import inspect

import pytest

from memlane.core.errors import QueueFullError, ValidationError
from memlane.core.ingest import Ingest, estimate_tokens
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.memory_model import Sessions
from memlane.core.model import Rejected


def test_facts_over_the_token_limit_are_left_out_and_said(memory: Memory) -> None:
    long = "word " * 40  # 200 bytes: 50 tokens
    res = memory.add_facts("alice", ["Short fact.", long, "Another short one."], max_tokens=20)
    assert res.rejected == (Rejected(index=1, tokens=50, limit=20),)
    assert [memory.get("alice", b).message for b in res.block_ids] == ["Short fact.", "Another short one."]
    assert estimate_tokens("é" * 7) == 4  # bytes of UTF-8, four a token, rounded up


def test_a_bad_item_is_named_by_its_place_in_the_list_given(memory: Memory) -> None:
    with pytest.raises(ValidationError) as err:
        memory.add_facts("alice", ["x" * 400, "fine", "  "], max_tokens=50)
    assert err.value.where == "facts[2]"
    assert memory.users() == []


def test_an_exchange_counts_its_two_sides(memory: Memory) -> None:
    user, assistant = "a" * 40, "b" * 39  # 40 + newline + 39 = 80 bytes: 20 tokens
    res = memory.add_exchanges("alice", [(user, assistant), (user, assistant + "b")], max_tokens=20)
    assert res.rejected == (Rejected(index=1, tokens=21, limit=20),) and len(res.block_ids) == 1


def test_every_item_over_the_limit_writes_nothing(memory: Memory) -> None:
    res = memory.add_facts("alice", ["x" * 100], max_tokens=10, session_id="s1")
    assert res.block_ids == () and res.jobs_enqueued == 0 and [r.index for r in res.rejected] == [0]
    assert memory.users() == []


def test_a_full_queue_refuses_an_async_add_and_writes_nothing(memory: Memory) -> None:
    memory.add_facts("alice", ["One.", "Two."], extract="async", max_queued=3)
    with pytest.raises(QueueFullError) as err:
        memory.add_facts("alice", ["Three.", "Four."], extract="async", max_queued=3)
    assert (err.value.queued, err.value.limit) == (2, 3)
    assert memory.count("alice") == 2 and memory.queue_status().queued == 2
    memory.add_facts("alice", ["Three."], extract="async", max_queued=3)  # fits exactly
    memory.add_exchanges("alice", [("Five?", "Six.")], max_queued=3)  # queues nothing: not checked
    assert memory.count("alice") == 4


def test_every_add_reports_the_llm_error_of_a_sync_extraction(memory: Memory) -> None:
    memory.llm = ScriptedLLM(lambda _: "not JSON at all")
    memory.max_attempts = 1
    for res in (
        memory.add("alice", [{"role": "user", "content": "Hi."}], extract="sync", perspective="single"),
        memory.add_facts("alice", ["A fact."], extract="sync"),
    ):
        assert (res.jobs_enqueued, res.jobs_done, res.jobs_failed) == (1, 0, 1)
        assert res.extraction_error is not None and "JSON" in res.extraction_error


def test_limits_are_checked(memory: Memory) -> None:
    for kw, where in (({"max_tokens": 0}, "max_tokens"), ({"max_queued": -1}, "max_queued")):
        with pytest.raises(ValidationError) as err:
            memory.add_facts("alice", ["A fact."], **kw)  # type: ignore[arg-type]
        assert err.value.where == where


def test_memory_is_a_facade_over_its_services(memory: Memory) -> None:
    """A method of the memory model is its service's own function, with its signature and docstring."""
    assert Memory.create_session is Sessions.create_session and Memory.add_facts is Ingest.add_facts
    assert memory.create_session.__doc__ == Sessions.create_session.__doc__
    bound = inspect.signature(memory.create_session).parameters
    assert list(bound) == list(inspect.signature(Sessions.create_session).parameters)[1:]
