"""Histories to add requests, and retrieved blocks back to ranked turns and sessions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from bench_synth import FIXTURES

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL
from memlane.bench.datasets.locomo import iter_locomo
from memlane.bench.datasets.longmemeval import iter_longmemeval
from memlane.bench.datasets.model import Haystack, Session, Turn
from memlane.bench.retrieval.history import HaystackIndex, haystack_requests, rank, resolve_perspective
from memlane.core.exchanges import MAX_MESSAGE_BYTES
from memlane.core.memory import Memory
from memlane.core.model import MemoryBlock, PerspectiveMode

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _haystack(*sessions: tuple[str, list[tuple[str, str]]]) -> Haystack:
    return Haystack(
        namespace="q1",
        sessions=tuple(
            Session(sid, T0, tuple(Turn(f"{sid}_{i + 1}", role, text) for i, (role, text) in enumerate(turns)))
            for sid, turns in sessions
        ),
        samples=(),
    )


def test_defaults_per_family() -> None:
    assert resolve_perspective(LOCOMO, "auto") is PerspectiveMode.SPEAKERS
    assert resolve_perspective(LONGMEMEVAL, "auto") is PerspectiveMode.SINGLE
    assert resolve_perspective(LONGMEMEVAL, "dual") is PerspectiveMode.DUAL


def test_locomo_turns_keep_ids_and_image_captions() -> None:
    haystack = next(iter_locomo(FIXTURES / "locomo_mini.json"))
    requests, notes = haystack_requests(haystack, LOCOMO, PerspectiveMode.SPEAKERS)
    assert notes == []
    assert [r.session_id for r in requests] == ["session_1", "session_2", "session_10"]
    first = requests[0]
    assert first.user == haystack.namespace and first.time == haystack.sessions[0].started_at
    assert [m["id"] for m in first.messages] == ["D1:1", "D1:2", "D1:3"]
    assert first.messages[1]["content"] == "Ana, you painted a sunrise in 2022! and shared a painting of a sunrise."


def test_empty_turns_are_dropped_with_a_note() -> None:
    haystack = next(iter_longmemeval(FIXTURES / "longmemeval_s_mini.json"))
    requests, notes = haystack_requests(haystack, LONGMEMEVAL, PerspectiveMode.SINGLE)
    assert any("empty turn f00d0001_2 dropped" in n for n in notes)
    assert sum(len(r.messages) for r in requests) == sum(len(s.turns) for s in haystack.sessions) - 1


def test_leading_assistant_turns_become_their_own_exchange() -> None:
    haystack = _haystack(("s1", [("assistant", "Hello!"), ("user", "I own a red bike."), ("assistant", "Nice.")]))
    requests, _ = haystack_requests(haystack, LONGMEMEVAL, PerspectiveMode.SINGLE)
    assert [[m["id"] for m in r.messages] for r in requests] == [["s1_1"], ["s1_2", "s1_3"]]
    # Dual mode already starts exchanges at user turns: one request.
    assert len(haystack_requests(haystack, LONGMEMEVAL, PerspectiveMode.DUAL)[0]) == 1


def test_oversized_turns_are_cut_to_the_core_limit() -> None:
    haystack = _haystack(("s1", [("user", "é" * MAX_MESSAGE_BYTES), ("assistant", "ok")]))
    requests, notes = haystack_requests(haystack, LONGMEMEVAL, PerspectiveMode.SINGLE)
    assert len(str(requests[0].messages[0]["content"]).encode()) <= MAX_MESSAGE_BYTES
    assert notes == [f"q1/s1: turn s1_1 cut to {MAX_MESSAGE_BYTES} bytes"]


def _block(session: str, ids: tuple[str, ...]) -> MemoryBlock:
    return MemoryBlock(
        id=f"b-{session}-{ids}",
        user="q1",
        conversation_id="q1",
        session_id=session,
        exchange_index=0,
        perspective="exchange",
        mode=PerspectiveMode.SINGLE,
        message="x",
        event_time=T0,
        ingest_time=T0,
        time_annotation="",
        content_hash="h",
        message_ids=ids,
    )


def test_rank_keeps_target_turns_once_and_pads_in_haystack_order() -> None:
    haystack = _haystack(
        ("s1", [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]),
        ("s2", [("user", "e"), ("assistant", "f")]),
        ("s3", [("user", "g"), ("assistant", "h")]),
    )
    index = HaystackIndex.of(haystack, LONGMEMEVAL)
    assert index.turn_ids == ("s1_1", "s1_3", "s2_1", "s3_1")
    blocks = [_block("s2", ("s2_1", "s2_2")), _block("s2", ("s2_1", "s2_2")), _block("s1", ("s1_3", "s1_4"))]
    r = rank(blocks, index, min_length=50)
    assert r.turn_ids == ("s2_1", "s1_3", "s1_1", "s3_1")  # retrieved first, then the rest of the haystack
    assert r.session_ids == ("s2", "s1", "s3")
    assert (r.retrieved_turns, r.retrieved_sessions) == (2, 2)
    short = rank(blocks, index, min_length=1)
    assert short.turn_ids == ("s2_1", "s1_3")  # long enough already: no padding


def test_locomo_rankings_count_every_speaker() -> None:
    haystack = next(iter_locomo(FIXTURES / "locomo_mini.json"))
    index = HaystackIndex.of(haystack, LOCOMO)
    assert index.turn_ids[:3] == ("D1:1", "D1:2", "D1:3")
    assert len(index.turn_ids) == sum(len(s.turns) for s in haystack.sessions)


def test_requests_are_accepted_by_the_core(memory: Memory) -> None:
    haystack = next(iter_longmemeval(FIXTURES / "longmemeval_s_mini.json"))
    haystack = replace(haystack, namespace="ns")
    requests, _ = haystack_requests(haystack, LONGMEMEVAL, PerspectiveMode.SINGLE)
    results = memory.add_many(requests)
    blocks = memory.list("ns", limit=1000)
    assert sum(len(r.block_ids) for r in results) == len(blocks)
    assert {b.session_id for b in blocks} == {s.session_id for s in haystack.sessions}
    assert all(b.message_ids for b in blocks)
