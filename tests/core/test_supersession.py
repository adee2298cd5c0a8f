"""Supersession: a newer block restating an older one ranks above it and the older hit names it; the
conditions each keep it from firing; the search end to end, with ``at``, past questions and the setting off."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.model import MemoryBlock, PerspectiveMode, content_hash
from memlane.core.retrieval import (
    PRESETS,
    Scored,
    SearchSettings,
    Version,
    asks_about_past,
    supersede,
    versions_of,
)
from memlane.core.store.sqlite import SqliteStore

ASKED = datetime(2024, 7, 1, tzinfo=UTC)
DAY = 86_400.0
T0 = ASKED.timestamp() - 120 * DAY
SAME = np.array([[1.0, 0.0]], dtype=np.float32)
CLOSE = np.array([[0.8, 0.6]], dtype=np.float32)  # cosine 0.8 with SAME
FAR = np.array([[0.0, 1.0]], dtype=np.float32)
BIKES = frozenset({"i", "have", "bikes", "three", "four"})
QUERY = "how many bikes do I have"
# The mechanics (who moves where) under the thresholds alone; the rule's question and value tests are in
# test_supersession_rule.py.
SETTINGS = SearchSettings(
    supersede_similarity=0.5,
    supersede_terms=0.5,
    supersede_ratio=0.5,
    supersede_sessions=False,
    supersede_current=False,
    supersede_values="off",
)


def version(days: float, vectors: np.ndarray = SAME, speaker: str = "user", words: frozenset[str] = BIKES) -> Version:
    return Version(T0 + days * DAY, speaker, words, (), vectors)


def order(ranked: Scored) -> list[int]:
    return [ref for ref, _, _ in ranked]


RANKED: Scored = [(1, 1.0, {"vector": 1}), (2, 0.9, {"vector": 2}), (3, 0.8, {"vector": 3})]


def test_newer_version_moves_just_above_the_older_and_the_older_names_it() -> None:
    versions = {1: version(0), 2: version(5, FAR, words=frozenset({"tea"})), 3: version(90, CLOSE)}
    ranked, newer = supersede(RANKED, versions, QUERY, SETTINGS, asked=ASKED)
    assert order(ranked) == [3, 1, 2]
    assert newer == {1: (3,)}
    assert {ref: score for ref, score, _ in ranked} == {1: 1.0, 2: 0.9, 3: 0.8}  # scores untouched
    # already first: nothing moves, the older one still names it
    ranked, newer = supersede(RANKED, {1: version(90), 3: version(0, CLOSE)}, QUERY, SETTINGS, asked=ASKED)
    assert order(ranked) == [1, 2, 3] and newer == {3: (1,)}


def test_a_chain_of_versions_ends_newest_first() -> None:
    versions = {1: version(0), 2: version(30), 3: version(60)}
    ranked, newer = supersede(RANKED, versions, QUERY, SETTINGS, asked=ASKED)
    assert order(ranked) == [3, 2, 1]
    assert newer == {1: (3, 2), 2: (3,)}


@pytest.mark.parametrize(
    ("why", "newest", "settings", "query", "until"),
    [
        ("another speaker", version(90, speaker="friend"), SETTINGS, QUERY, None),
        ("another subject by its vectors", version(90, FAR), SETTINGS, QUERY, None),
        ("no query word in common", version(90, words=frozenset({"three", "four"})), SETTINGS, QUERY, None),
        ("told within the hour", version(0.01), SETTINGS, QUERY, None),
        ("told after the time asked about", version(90), SETTINGS, QUERY, T0 + 60 * DAY),
        ("scores too far apart", version(90), replace(SETTINGS, supersede_ratio=0.9), QUERY, None),
        ("turned off", version(90), replace(SETTINGS, supersede=False), QUERY, None),
        ("only the first two take part", version(90), replace(SETTINGS, supersede_depth=2), QUERY, None),
        ("a question about the past", version(90), SETTINGS, "how many bikes did I originally have", None),
        ("a question naming a time", version(90), SETTINGS, "how many bikes did I have two months ago", None),
    ],
)
def test_what_keeps_the_order(
    why: str, newest: Version, settings: SearchSettings, query: str, until: float | None
) -> None:
    versions = {1: version(0), 2: version(5, FAR, words=frozenset({"tea"})), 3: newest}
    ranked, newer = supersede(RANKED, versions, query, settings, asked=ASKED, until=until)
    assert order(ranked) == [1, 2, 3], why
    assert newer == {}, why


def test_past_questions() -> None:
    for q in (
        "What was my previous personal best?",
        "Where did I originally keep my sneakers?",
        "What did I say in March about the trip?",
        "What gadget did I buy before getting the air fryer?",
        "Which gym did I use to go to?",
    ):
        assert asks_about_past(q, ASKED), q
    for q in ("How many bikes do I have?", "Where do I currently keep my old sneakers?", "What is my best time?"):
        assert not asks_about_past(q, ASKED), q


def test_settings_are_checked() -> None:
    for field, bad in (
        ("supersede", 1),
        ("supersede_depth", 0),
        ("supersede_similarity", 1.5),
        ("supersede_ratio", -1),
        ("supersede_values", "names"),
        ("supersede_current", "yes"),
    ):
        with pytest.raises(ValidationError) as err:
            SearchSettings(**{field: bad})  # type: ignore[arg-type]
        assert err.value.where == field
    assert PRESETS["hybrid"].supersede and not PRESETS["hybrid-no-supersede"].supersede


@pytest.fixture
def mem(tmp_path) -> Memory:  # type: ignore[no-untyped-def]
    memory = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder())
    said = [
        ("march", 120, "I have three bikes in the garage: a road bike, a gravel bike and a mountain bike."),
        ("june", 30, "I just bought my fourth bike, so now I have four bikes in the garage."),
        ("other", 60, "We cooked a lentil soup with lots of cumin for dinner."),
    ]
    for session, days_ago, text in said:
        messages = [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
        memory.add("alice", messages, session_id=session, time=ASKED - timedelta(days=days_ago))
    return memory


def test_search_puts_the_newest_version_first_and_points_the_older_one_at_it(mem: Memory) -> None:
    settings = replace(PRESETS["hybrid"], supersede_similarity=0.3)
    query = "how many bikes do I have in the garage"
    off = mem.search("alice", query, 3, mode=replace(settings, supersede=False), at=ASKED)
    on = mem.search("alice", query, 3, mode=settings, at=ASKED)
    assert [h.block.session_id for h in off][:2] == ["march", "june"]  # relevance alone: the old one first
    assert [h.block.session_id for h in on][:2] == ["june", "march"]
    assert on[1].superseded_by == (on[0].block.id,) and on[0].superseded_by == ()
    assert all(h.superseded_by == () for h in off)
    # asked about April: the June version was not told yet
    april = mem.search("alice", query, 3, mode=settings, at=ASKED - timedelta(days=80))
    assert [h.block.session_id for h in april][:2] == ["march", "june"] and april[0].superseded_by == ()
    # asked about the past: as ranked
    past = mem.search("alice", "how many bikes did I originally have in the garage", 3, mode=settings, at=ASKED)
    assert past[0].block.session_id == "march" and past[0].superseded_by == ()


def test_with_sessions_the_newer_version_also_passes_the_rest_of_the_older_session() -> None:
    ranked: Scored = [(2, 1.0, {}), (1, 0.95, {}), (3, 0.9, {})]
    versions = {2: version(0, FAR, words=frozenset({"tea"})), 1: version(0), 3: version(90, CLOSE)}
    sessions = {1: "march", 2: "march", 3: "june"}
    plain, _ = supersede(ranked, versions, QUERY, SETTINGS, asked=ASKED, sessions=sessions)
    assert order(plain) == [2, 3, 1]  # above the version it restates only
    wide = replace(SETTINGS, supersede_sessions=True)
    lifted, newer = supersede(ranked, versions, QUERY, wide, asked=ASKED, sessions=sessions)
    assert order(lifted) == [3, 2, 1] and newer == {1: (3,)}


def test_extracted_facts_are_the_finer_unit() -> None:
    # Two long exchanges about different things each hold one fact about the bikes: their messages are far
    # apart, their facts close, and the facts' vectors (read from the cache by content hash) decide.
    embedder = HashingEmbedder()

    class Cache:
        def __init__(self) -> None:
            self.vectors: dict[str, np.ndarray] = {}

        def get_vectors(self, model_id: str, hashes: list[str]) -> dict[str, np.ndarray]:
            return {h: self.vectors[h] for h in hashes if h in self.vectors}

    cache = Cache()
    texts = {
        "old": ("user: my tomato plants and the compost heap need water", ("The user has three bikes.",)),
        "new": ("user: the tax forms are due and the printer is broken", ("The user has four bikes now.",)),
    }
    blocks = {}
    for ref, (key, (message, facts)) in enumerate(texts.items(), start=1):
        for text in (message, *facts):
            cache.vectors[content_hash(text)] = embedder.embed([text])[0]
        blocks[ref] = replace(
            block(key, message, days=0 if key == "old" else 90), contexts=facts, content_hash=content_hash(message)
        )
    with_facts = versions_of(cache, "m", blocks)
    no_facts = versions_of(cache, "m", {r: replace(b, contexts=()) for r, b in blocks.items()})
    ranked: Scored = [(1, 1.0, {}), (2, 0.9, {})]
    query = "how many bikes does the user have"
    settings = replace(SETTINGS, supersede_terms=0.0, supersede_similarity=0.8)  # messages 0.72, facts 0.84
    assert supersede(ranked, with_facts, query, settings, asked=ASKED)[1] == {1: (2,)}
    assert supersede(ranked, no_facts, query, settings, asked=ASKED)[1] == {}


def block(key: str, message: str, *, days: float) -> MemoryBlock:
    when = datetime.fromtimestamp(T0 + days * DAY, tz=UTC)
    return MemoryBlock(
        id=key, user="alice", conversation_id="c", session_id=key, exchange_index=0, perspective="user",
        mode=PerspectiveMode.SINGLE, message=message, event_time=when, ingest_time=when, time_annotation="",
        content_hash="",
    )  # fmt: skip
