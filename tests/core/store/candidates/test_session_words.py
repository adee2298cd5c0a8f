"""The session-words ranking: the people's words of each block, kept per key by the stores, summed per
session and ranked by BM25 with the user's own statistics; and what it does to a search."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from store_downgrade import downgrade_to_v5
from word_corpus import QUERIES as CORPUS_QUERIES
from word_corpus import WORDS

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ValidationError
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import PerspectiveMode
from memlane.core.ranking.bm25 import WORDS_B, WORDS_K1
from memlane.core.ranking.session_words import people_words, ranks_of, session_word_ranks
from memlane.core.retrieval import PRESETS, Position, SearchSettings, rescore
from memlane.core.store.candidates.keyword import query_terms
from memlane.core.store.sqlite import SqliteStore, segments
from memlane.core.store.sqlite.schema import MIGRATIONS
from memlane.core.store.sqlite.tokenizer import tokenize

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
QUERIES = [*CORPUS_QUERIES, "dog"]


def chat(*lines: str, roles: tuple[str, str] = ("user", "assistant")) -> list[dict[str, str]]:
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(lines)]


# -- the words -----------------------------------------------------------------------------------------


def test_people_words_are_the_users_turn_counted_once_per_exchange() -> None:
    single = "user: I planted tomatoes\nin the garden\nassistant: Tomatoes love sun."
    assert people_words(single, PerspectiveMode.SINGLE, "exchange") == "I planted tomatoes\nin the garden"
    assert people_words(single, "dual", "user") == "I planted tomatoes\nin the garden"
    assert people_words(single, "dual", "assistant") == ""  # the other perspective of the same exchange
    assert people_words("assistant: Hello! How can I help?", "single", "exchange") == ""  # a greeting
    assert people_words("user: just a note", "single", "exchange") == "just a note"  # no reply
    two = "Caroline: I went kayaking\nMelanie: On the river?"
    assert people_words(two, "speakers", "Caroline") == two  # two people, no assistant: both speak
    assert people_words(two, "speakers", "Melanie") == ""
    # the one case that reads short: a user turn with a line that looks like the reply's
    odd = "user: quote:\nassistant: hi\nend\nassistant: ok"
    assert people_words(odd, "single", "exchange") == "quote:"


def test_ranks_share_ties_and_skip_what_matched_nothing() -> None:
    assert ranks_of({"a": 2.0, "b": 5.0, "c": 2.0, "d": 0.0, "e": 1.0, "f": -1.0}) == {"b": 1, "a": 2, "c": 2, "e": 4}
    assert ranks_of({}) == {}


# -- the ranking against a reference -------------------------------------------------------------------


def reference_ranks(mem: Memory, user: str, query: str) -> dict[str, int]:
    """BM25 over the user's sessions, each the people's words of its blocks, written out plainly."""
    store: SqliteStore = mem.store  # type: ignore[assignment]
    sessions: dict[str, Counter[str]] = {}
    for block in mem.list(user, limit=10_000):
        words = people_words(block.message, block.mode, block.perspective)
        bag = tokenize(store._conn(), [words])[0]
        sessions.setdefault(block.session_id, Counter()).update(bag)
    docs = {s: bag for s, bag in sessions.items() if sum(bag.values()) > 0}
    if not docs:
        return {}
    avgdl = sum(sum(b.values()) for b in docs.values()) / len(docs)
    terms = set(tokenize(store._conn(), [" ".join(query_terms(query))])[0])
    scores: dict[str, float] = {}
    for s, bag in sessions.items():
        dl = sum(bag.values())
        total = 0.0
        for t in terms:
            tf = bag.get(t, 0)
            if tf:
                df = sum(1 for b in docs.values() if t in b)
                idf = max(math.log((len(docs) - df + 0.5) / (df + 0.5)), 1e-6)
                total += idf * tf * (WORDS_K1 + 1) / (tf + WORDS_K1 * (1 - WORDS_B + WORDS_B * dl / avgdl))
        scores[s] = total
    return ranks_of(scores)


def fill(mem: Memory, user: str, rng: random.Random, mode: str, sessions: int) -> None:
    roles = ("Ann", "Ben") if mode == "speakers" else ("user", "assistant")
    for s in range(sessions):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10))) for _ in range(rng.randint(1, 8))]
        if mode != "speakers" and rng.random() < 0.2:
            lines = ["hello there", *lines]  # an exchange the assistant opens in dual mode
            roles_used = ("assistant", "user")
        else:
            roles_used = roles
        mem.add(
            user,
            chat(*lines, roles=roles_used),
            session_id=f"{user}-s{s}",
            time=T0 + timedelta(days=s),
            perspective=mode,
        )


@pytest.mark.parametrize("mode", ["single", "dual", "speakers"])
def test_store_ranks_equal_the_reference_for_every_perspective(tmp_path: Path, mode: str) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=16))
    rng = random.Random(len(mode))
    fill(mem, "alice", rng, mode, sessions=12)
    fill(mem, "bob", rng, mode, sessions=5)
    blocks = mem.list("alice", limit=10_000)
    mem.delete("alice", blocks[3].id)  # deletes take the block's words out of its session
    sessions = sorted({b.session_id for b in mem.list("alice", limit=10_000)})
    for query in QUERIES:
        expected = reference_ranks(mem, "alice", query)
        assert expected  # the queries do match something
        assert session_word_ranks(mem.store.session_word_counts("alice", query, sessions)) == expected, query
        assert session_word_ranks(mem.store.session_word_counts("alice", query, sessions[:3])) == {
            s: r for s, r in expected.items() if s in sessions[:3]
        }
    # another user's sessions are never ranked for alice, and an unknown user has nothing
    bob_sessions = sorted({b.session_id for b in mem.list("bob", limit=10_000)})
    assert session_word_ranks(mem.store.session_word_counts("alice", "tomato", bob_sessions)) == {}
    assert session_word_ranks(mem.store.session_word_counts("nobody", "tomato", sessions)) == {}
    assert session_word_ranks(mem.store.session_word_counts("alice", "the of and", sessions)) == {}
    mem.close()


def test_only_the_users_words_rank_a_session(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=16))
    mem.add("u", chat("I adopted a dog last week", "Dogs are great company"), session_id="told", perspective="single")
    mem.add(
        "u",
        chat("Any tips for my trip?", "Take your dog, dog-friendly hotels help"),
        session_id="tips",
        perspective="single",
    )
    mem.add("u", chat("What should I cook?", "Try sushi"), session_id="other", perspective="single")
    ranks = session_word_ranks(mem.store.session_word_counts("u", "my dog", ["told", "tips", "other"]))
    assert ranks == {"told": 1}  # the assistant's "dog" in "tips" does not count
    mem.close()


# -- migration 6 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("memo", [None, 3], ids=["memo", "memo-cleared"])
def test_migration_gives_existing_segments_the_words_of_their_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memo: int | None
) -> None:
    if memo is not None:  # the migration forgets its memo of word bags between segments
        monkeypatch.setattr(segments, "MIGRATION_MEMO_MAX", memo)
    path = tmp_path / "store.db"
    mem = Memory(SqliteStore(path), HashingEmbedder(dim=16), llm=ScriptedLLM())
    rng = random.Random(3)
    for user, mode in (("alice", "single"), ("bob", "dual"), ("carol", "speakers")):
        fill(mem, user, rng, mode, sessions=6)
    mem.add("alice", chat("my sister likes sushi", "Nice"), session_id="alice-s1", extract="sync")  # fact keys
    mem.delete("bob", mem.list("bob")[2].id)
    sessions = sorted({r[0] for r in mem.store.query("SELECT session_id FROM blocks")})  # type: ignore[attr-defined]
    users = ("alice", "bob", "carol")
    before = {(u, q): session_word_ranks(mem.store.session_word_counts(u, q, sessions)) for u in users for q in QUERIES}
    columns = "sessions, words_lengths, words_entries, words_term_ids, words_counts"
    stored = mem.store.query(f"SELECT id, {columns} FROM key_segments ORDER BY id")  # type: ignore[attr-defined]
    assert mem.store.query("SELECT count(*) FROM search_keys WHERE kind <> 'message'")[0][0] > 0  # type: ignore[attr-defined]
    mem.close()
    downgrade_to_v5(path)

    store = SqliteStore(path)
    assert store.query("PRAGMA user_version") == [(len(MIGRATIONS),)]
    assert store.integrity_check() == []
    assert store.query(f"SELECT id, {columns} FROM key_segments ORDER BY id") == stored
    assert {
        (u, q): session_word_ranks(store.session_word_counts(u, q, sessions)) for u in users for q in QUERIES
    } == before
    assert any(before.values())
    store.close()


def test_integrity_check_finds_words_columns_that_disagree(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=16))
    mem.add("u", chat("tomato garden", "ok"), perspective="single")
    mem.store.query("UPDATE key_segments SET words_lengths = x''")  # type: ignore[attr-defined]
    assert any("disagree" in p for p in mem.store.integrity_check())
    mem.close()


# -- what it does to a search --------------------------------------------------------------------------


def test_rescore_adds_the_words_bonus_by_session_rank() -> None:
    settings = SearchSettings(words_weight=0.5, words_k=2)
    scores = {1: 1.0, 2: 0.8, 3: 0.4, 4: 0.3}
    positions = {r: Position(f"s{r}", 0) for r in scores}
    out = rescore(scores, positions, settings, {"s3": 1, "s4": 2, "s9": 1})
    assert out[1] == 1.0 and out[2] == 0.8  # sessions that matched no word
    assert out[3] == pytest.approx(0.4 + 0.5 * 1.0 * 3 / 3)
    assert out[4] == pytest.approx(0.3 + 0.5 * 1.0 * 3 / 4)
    assert rescore(scores, positions, SearchSettings(), {"s3": 1}) == scores  # weight 0: nothing


def test_settings_check_the_words_fields() -> None:
    assert SearchSettings(words_weight=0.3, words_k=0).uses_context
    assert not SearchSettings().uses_words
    with pytest.raises(ValidationError, match="words_weight"):
        SearchSettings(words_weight=-1)
    with pytest.raises(ValidationError, match="words_k"):
        SearchSettings(words_k=-1)
    assert SearchSettings(words_weight=0.2).to_json()["words_weight"] == 0.2


def test_a_session_the_user_talked_about_rises_in_search(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=16))
    # The user talked about the violin in "music"; the exchange that answers does not say "violin".
    mem.add(
        "u",
        chat("I started violin lessons", "How exciting", "She is called Ines", "Good to know"),
        session_id="music",
        perspective="single",
    )
    for i in range(6):  # sessions where only the assistant says the question's words
        mem.add(
            "u",
            chat(f"tell me something {i}", "Ask: who is my violin teacher, who is my teacher"),
            session_id=f"noise{i}",
            perspective="single",
        )
    query = "who is my violin teacher"
    plain = mem.search("u", query, k=3, mode=PRESETS["hybrid-no-words"])
    boosted = mem.search("u", query, k=3, mode=replace(PRESETS["hybrid-no-words"], words_weight=1.0))
    assert [h.block.session_id for h in plain] == ["noise4", "noise3", "noise1"]
    assert [(h.block.session_id, h.block.exchange_index) for h in boosted] == [
        ("music", 0),
        ("music", 1),
        ("noise4", 0),
    ]
    # the noise sessions match no word of the user's: their scores are unchanged
    assert boosted[2].score == plain[0].score
    mem.close()


def test_session_codes_are_stable_64_bit_values() -> None:
    from memlane.core.store.candidates.terms import session_code

    codes = [session_code(f"s{i}") for i in range(1000)]
    assert len(set(codes)) == 1000 and all(-(2**63) <= c < 2**63 for c in codes)
    assert session_code("answer_1") == session_code("answer_1")
    assert np.array(codes, dtype=np.int64).tolist() == codes
