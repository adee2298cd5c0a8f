"""Filtered search on every backend (docs/design/007-memory-model.md): equal to filtering the full ranking,
then cutting it; a search restricted to one session ranks within it."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from store_samples import chat

from memlane.core.memory import Memory
from memlane.core.model import BlockKind, Filters, MemoryBlock
from memlane.core.retrieval import PRESETS

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


WORDS = ["apple", "river", "stone", "cloud", "piano", "tiger", "lamp", "ocean", "maple", "violin"]


def _random_store(mem: Memory, rng: random.Random) -> list[MemoryBlock]:
    mem.prompts.create("p1", "Remember fruit.", description="fruit")
    mem.prompts.update("p1", text="Remember fruit and rivers.")
    for i in range(24):
        words = " ".join(rng.sample(WORDS, 3))
        session = f"s{rng.randrange(4)}"
        labels = {"color": rng.choice(["red", "blue"]), "size": rng.choice(["s", "m", "l"])}
        prompt = rng.choice([None, ("p1", 0), ("p1", 1)])
        if rng.random() < 0.5:
            mem.add_facts("alice", [f"fact {i} about {words}"], session_id=session, annotations=labels, prompt=prompt,
                          time=T0 + timedelta(hours=i))  # fmt: skip
        else:
            mem.add_exchanges("alice", [(f"tell me {i} {words}", f"sure {words}")], session_id=session,
                              annotations=labels, prompt=prompt, time=T0 + timedelta(hours=i))  # fmt: skip
    mem.add_facts("bob", ["apple river stone cloud"], annotations={"color": "red"})  # another user's: never found
    return mem.list("alice", limit=1000)


def _random_filters(rng: random.Random, blocks: list[MemoryBlock]) -> Filters:
    ingests = sorted({b.ingest_time for b in blocks})
    rules: dict[str, object] = {}
    if rng.random() < 0.5:
        rules["sessions"] = tuple(rng.sample([f"s{i}" for i in range(5)], rng.randint(1, 3)))
    if rng.random() < 0.3:
        rules["block_ids"] = tuple(b.id for b in rng.sample(blocks, rng.randint(1, 12)))
    if rng.random() < 0.6:
        rules["annotations"] = dict(
            rng.sample([("color", rng.choice(["red", "blue"])), ("size", "m")], rng.randint(1, 2))
        )
        rules["annotations_after_cut"] = rng.random() < 0.3
    if rng.random() < 0.3:
        rules["kinds"] = frozenset({rng.choice(list(BlockKind))})
    if rng.random() < 0.3:
        rules["ingested_after"] = rng.choice(ingests)
    if rng.random() < 0.3:
        rules["ingested_before"] = rng.choice(ingests)
    if rng.random() < 0.3:
        rules["prompt_id"] = "p1"
        if rng.random() < 0.5:
            rules["prompt_version"] = rng.choice([0, 1])
    return Filters(**rules)  # type: ignore[arg-type]


def test_filtered_search_equals_filter_then_rank(mem: Memory) -> None:
    """A block's vector and keyword scores do not depend on the pool (BM25 keeps the user's own statistics),
    so the reference is the unfiltered ranking of every block, filtered, then cut at k."""
    rng = random.Random(7)
    blocks = _random_store(mem, rng)
    n = len(blocks)
    answered = 0
    for trial in range(40):
        filters = _random_filters(rng, blocks)
        query = " ".join(rng.sample(WORDS, 2))
        k = rng.randint(1, 8)
        for name in ("vector", "keyword"):
            # The retrievers' own order: supersession (on by default) may lift a newer restatement.
            mode = replace(PRESETS[name], supersede=False)
            full = mem.search("alice", query, k=n, mode=mode, distinct=False)
            pre = filters.pre
            pool = [h for h in full if pre.admits(h.block)]
            expected = pool[:k]
            if filters.annotations_after_cut:
                expected = [h for h in expected if filters.admits(h.block)]
            got = mem.search("alice", query, k=k, mode=mode, distinct=False, filters=filters)
            where = f"trial {trial}, {name}, {filters}"
            assert [round(h.score, 5) for h in got] == [round(h.score, 5) for h in expected], where
            assert {h.block.id for h in got if h.score != got[-1].score} == {
                h.block.id for h in expected if h.score != expected[-1].score
            }, where
            assert all(filters.admits(h.block) for h in got), where
            answered += bool(got)
        hybrid = mem.search("alice", query, k=k, filters=filters)
        assert all(filters.admits(h.block) for h in hybrid)
        browse = mem.browse("alice", filters, limit=100)
        ref = sorted((b for b in blocks if filters.admits(b)), key=lambda b: (b.ingest_time, b.id), reverse=True)
        assert [b.id for b in browse.items] == [b.id for b in ref] and browse.total == len(ref)
    assert answered > 30  # the filters left something to rank in most trials: the comparison was not vacuous


def test_a_search_restricted_to_one_session_ranks_within_it(mem: Memory) -> None:
    """The hybrid ranking's session context comes from the restricted pool: every candidate is in the one
    session, so the session gain is the same for all and the order is that of the session's own evidence."""
    for s in range(3):
        mem.add("alice", chat(f"session {s} talks about gardens and roses", "nice"), session_id=f"g{s}", time=T0)
        mem.add("alice", chat(f"session {s} mentions a trip to Lisbon", "fun"), session_id=f"g{s}", time=T0)
    hits = mem.search("alice", "gardens roses", k=4, filters=Filters(sessions=("g1",)))
    assert hits and all(h.block.session_id == "g1" for h in hits)
    assert "gardens" in hits[0].block.message
