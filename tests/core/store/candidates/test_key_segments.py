"""The SQLite store's key segments: each user's key vectors and term bags in a few rows, merged by size
tier, rewritten by deletes, moved from the per-key tables of schema 3 by migration 4."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from store_downgrade import downgrade_to_v3, downgrade_to_v4
from word_corpus import QUERIES, WORDS

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.ranking.session_words import people_words, session_word_ranks
from memlane.core.store.candidates.terms import session_code
from memlane.core.store.candidates.vectors import KIND_CODES
from memlane.core.store.sqlite import SqliteStore, segments
from memlane.core.store.sqlite.keys import load_user_index
from memlane.core.store.sqlite.schema import MIGRATIONS
from memlane.core.store.sqlite.segments import COLUMNS, Segment, quantize, tier
from memlane.core.store.sqlite.tokenizer import tokenize

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.fixture
def small_tiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiers small enough that a few dozen writes go through every merge."""
    monkeypatch.setattr(segments, "FANOUT", 3)
    monkeypatch.setattr(segments, "TIER_LIMITS", (4, 12, 40))


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(SqliteStore(tmp_path / "store.db"), HashingEmbedder(dim=16))
    yield m
    m.close()


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def add(mem: Memory, user: str, rng: random.Random, exchanges: int, day: int) -> None:
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(2 * exchanges)]
    mem.add(user, chat(*lines), session_id=f"s{day % 5}", time=T0 + timedelta(days=day))


def user_segments(store: SqliteStore, user: str) -> list[Segment]:
    rows = store.query(
        f"SELECT {COLUMNS} FROM key_segments WHERE user_id = (SELECT id FROM users WHERE name = ?)", (user,)
    )
    return [Segment.from_row(r) for r in rows]


def assert_segments_hold_the_keys(store: SqliteStore, embedder: HashingEmbedder, user: str) -> None:
    """Every key of the user is in exactly one segment, with its own vector, term bag and columns, its
    session's code and its block's people's words (message keys only); the user's whole index loads in key
    order; no tier holds FANOUT segments."""
    keys = store.query(
        "SELECT k.pk, k.block_pk, k.kind, k.text, b.event_ts, b.session_id, b.message, b.mode, b.perspective "
        "FROM search_keys k JOIN blocks b ON b.pk = k.block_pk "
        "WHERE k.user_id = (SELECT id FROM users WHERE name = ?) ORDER BY k.pk",
        (user,),
    )
    segs = user_segments(store, user)
    held = np.concatenate([s.key_pks for s in segs]) if segs else np.zeros(0, dtype=np.int64)
    assert sorted(held.tolist()) == [k[0] for k in keys]  # each key once, no other user's
    for t in range(len(segments.TIER_LIMITS)):
        assert sum(tier(s.n) == t for s in segs) < segments.FANOUT
    user_row = store.query("SELECT id FROM users WHERE name = ?", (user,))
    if not user_row:
        assert not keys and not segs
        return
    conn = store._conn()
    conn.execute("BEGIN")
    matrix, terms = load_user_index(conn, int(user_row[0][0]), 0)
    names = {i: t for i, t in conn.execute("SELECT id, term FROM terms")}
    bags = tokenize(conn, [k[3] for k in keys])
    word_bags = tokenize(conn, [people_words(k[6], k[7], k[8]) if k[2] == "message" else "" for k in keys])
    conn.execute("COMMIT")
    assert matrix.block_pks.tolist() == [k[1] for k in keys]
    assert matrix.kinds.tolist() == [KIND_CODES[k[2]] for k in keys]
    assert matrix.event_ts.tolist() == [k[4] for k in keys]
    if keys:
        exact = embedder.embed([k[3] for k in keys])
        q, scales = quantize(exact)
        np.testing.assert_array_equal(matrix.vectors, q)
        np.testing.assert_array_equal(matrix.scales, scales)
        back = matrix.vectors.astype(np.float32) * matrix.scales[:, None]
        assert np.all(np.abs(back - exact) <= scales[:, None] * 0.5001)  # within half a step
    for j, bag in enumerate(bags):
        a, b = int(terms.offsets[j]), int(terms.offsets[j + 1])
        got = {names[int(i)]: int(c) for i, c in zip(terms.term_ids[a:b], terms.counts[a:b], strict=True)}
        assert got == dict(bag)
        assert terms.lengths[j] == sum(bag.values())
    assert terms.sessions.tolist() == [session_code(k[5]) for k in keys]
    for j, bag in enumerate(word_bags):
        a, b = int(terms.words_offsets[j]), int(terms.words_offsets[j + 1])
        ids, counts = terms.words_term_ids[a:b], terms.words_counts[a:b]
        assert {names[int(i)]: int(c) for i, c in zip(ids, counts, strict=True)} == dict(bag)
        assert terms.words_lengths[j] == sum(bag.values())


def test_writes_merge_by_tier_and_deletes_rewrite_segments(small_tiers: None, mem: Memory) -> None:
    rng = random.Random(11)
    users = ["alice", "bob"]
    for step in range(60):
        user = rng.choice(users)
        blocks = mem.list(user, limit=1000) if user in {u.name for u in mem.users()} else []
        action = rng.random()
        if action < 0.7 or not blocks:
            add(mem, user, rng, exchanges=rng.choice([1, 1, 1, 2, 9]), day=step)  # 2 keys per exchange (dual)
        elif action < 0.95:
            mem.delete(user, rng.choice(blocks).id)
        else:
            mem.delete_user(user)
        assert mem.store.integrity_check() == [], step
        for u in users:
            assert_segments_hold_the_keys(mem.store, mem.embedder, u)  # type: ignore[arg-type]
        # the cached indexes (extended by writes, dropped by deletes) rank like ones loaded from the file
        fresh = SqliteStore(mem.store.path)  # type: ignore[attr-defined]
        sessions = sorted({r[0] for r in fresh.query("SELECT session_id FROM blocks")})
        for q in QUERIES:
            assert mem.store.keyword_candidates(user, q, 5) == fresh.keyword_candidates(user, q, 5)
            assert session_word_ranks(mem.store.session_word_counts(user, q, sessions)) == session_word_ranks(
                fresh.session_word_counts(user, q, sessions)
            )
            vec = mem.embedder.embed([q])
            assert mem.store.vector_candidates(user, vec, 5) == fresh.vector_candidates(user, vec, 5)
        fresh.close()
    assert max(len(user_segments(mem.store, u)) for u in users) > 1  # type: ignore[arg-type]


def test_a_merge_around_a_large_segment_loads_in_key_order(small_tiers: None, mem: Memory) -> None:
    rng = random.Random(3)
    add(mem, "alice", rng, exchanges=1, day=0)  # 2 keys, tier 0
    add(mem, "alice", rng, exchanges=25, day=1)  # 50 keys: sealed at once
    add(mem, "alice", rng, exchanges=1, day=2)
    add(mem, "alice", rng, exchanges=1, day=3)  # the third tier-0 segment: the three merge
    segs = user_segments(mem.store, "alice")  # type: ignore[arg-type]
    assert sorted(s.n for s in segs) == [6, 50]
    small = next(s for s in segs if s.n == 6)
    large = next(s for s in segs if s.n == 50)
    assert small.key_pks.min() < large.key_pks.min() < large.key_pks.max() < small.key_pks.max()
    assert_segments_hold_the_keys(mem.store, mem.embedder, "alice")  # type: ignore[arg-type]


def test_migration_moves_per_key_rows_into_segments(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    embedder = HashingEmbedder(dim=16)
    mem = Memory(SqliteStore(path), embedder)
    rng = random.Random(5)
    for day in range(12):
        add(mem, "alice" if day % 3 else "bob", rng, exchanges=rng.randint(1, 4), day=day)
    mem.delete("alice", mem.list("alice")[3].id)
    vec = embedder.embed([QUERIES[0]])
    before = {
        (u, q): (mem.store.keyword_candidates(u, q, 10), mem.store.vector_candidates(u, vec, 10))
        for u in ("alice", "bob")
        for q in QUERIES
    }
    stats = mem.store.query("SELECT * FROM terms ORDER BY id"), mem.store.query("SELECT * FROM corpus")
    mem.close()
    downgrade_to_v3(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM key_vectors").fetchone()[0] > 0
        assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name = 'key_segments'").fetchone() == (0,)

    migrated = Memory(SqliteStore(path), embedder)
    store = migrated.store
    names = {r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type = 'table'")}  # type: ignore[attr-defined]
    assert "key_segments" in names and not names & {"key_vectors", "key_terms"}
    assert store.integrity_check() == []
    assert (store.query("SELECT * FROM terms ORDER BY id"), store.query("SELECT * FROM corpus")) == stats  # type: ignore[attr-defined]
    after = {
        (u, q): (store.keyword_candidates(u, q, 10), store.vector_candidates(u, vec, 10))
        for u in ("alice", "bob")
        for q in QUERIES
    }
    assert after == before
    for u in ("alice", "bob"):
        assert len(user_segments(store, u)) == 1  # type: ignore[arg-type]
        assert_segments_hold_the_keys(store, embedder, u)  # type: ignore[arg-type]
    migrated.close()


def test_migration_quantizes_schema_4_segments(small_tiers: None, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    embedder = HashingEmbedder(dim=16)
    mem = Memory(SqliteStore(path), embedder)
    rng = random.Random(8)
    for day in range(20):
        add(mem, "alice" if day % 3 else "bob", rng, exchanges=rng.choice([1, 2, 9]), day=day)
    vecs = [embedder.embed([q]) for q in QUERIES]
    before = {(u, i): mem.store.vector_candidates(u, v, 10) for u in ("alice", "bob") for i, v in enumerate(vecs)}
    segs = {u: user_segments(mem.store, u) for u in ("alice", "bob")}  # type: ignore[arg-type]
    mem.close()
    downgrade_to_v4(path)
    with sqlite3.connect(path) as raw:
        floats = raw.execute("SELECT keys, length(vectors) FROM key_segments").fetchall()
        assert floats and all(size == 4 * 16 * n for n, size in floats)

    store = SqliteStore(path)
    assert store.query("PRAGMA user_version") == [(len(MIGRATIONS),)]
    assert store.integrity_check() == []
    names = {r[0] for r in store.query("SELECT name FROM sqlite_master")}
    assert "key_segments_v4" not in names and "key_segments_user" in names
    for u in ("alice", "bob"):
        migrated = user_segments(store, u)
        assert len(migrated) == len(segs[u]) > 0
        for old, new in zip(segs[u], migrated, strict=True):  # the same int8 rows: quantizing is idempotent
            np.testing.assert_array_equal(new.vectors, old.vectors)
            np.testing.assert_allclose(new.scales, old.scales, rtol=1e-6)
    after = {(u, i): store.vector_candidates(u, v, 10) for u in ("alice", "bob") for i, v in enumerate(vecs)}
    assert {k: [b for b, _ in v] for k, v in after.items()} == {k: [b for b, _ in v] for k, v in before.items()}
    store.close()


def test_quantize_bounds_the_error_and_keeps_zero_rows() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(50, 384)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[7] = 0.0
    q, scales = quantize(v)
    assert q.dtype == np.int8 and scales.dtype == np.float32 and q.shape == v.shape
    assert np.all(np.abs(q[np.arange(50) != 7]).max(axis=1) == 127)  # each row uses the whole range
    assert not q[7].any() and scales[7] == 1.0
    back = q.astype(np.float32) * scales[:, None]
    assert np.all(np.abs(back - v) <= scales[:, None] * 0.5001)
    cos = (back * v).sum(axis=1)[np.arange(50) != 7] / np.linalg.norm(back[np.arange(50) != 7], axis=1)
    assert cos.min() > 0.9999
    assert quantize(np.zeros((0, 384), dtype=np.float32))[0].shape == (0, 384)


def test_integrity_check_finds_segments_out_of_step(mem: Memory) -> None:
    rng = random.Random(9)
    add(mem, "alice", rng, exchanges=3, day=0)
    add(mem, "bob", rng, exchanges=2, day=1)
    store: SqliteStore = mem.store  # type: ignore[assignment]
    assert store.integrity_check() == []
    with store.transaction() as conn:  # a key that no segment holds
        conn.execute(
            "INSERT INTO search_keys(user_id, block_pk, ns, kind, text, content_hash) "
            "SELECT user_id, block_pk, ns, kind, text, content_hash FROM search_keys LIMIT 1"
        )
    assert any("not exactly the search keys" in p for p in store.integrity_check())
    with store.transaction() as conn:
        conn.execute("DELETE FROM search_keys WHERE pk = (SELECT max(pk) FROM search_keys)")
        conn.execute(
            "UPDATE key_segments SET event_ts = substr(event_ts, 1, 8) WHERE id = (SELECT min(id) FROM key_segments)"
        )
    assert any("arrays disagree" in p for p in store.integrity_check())
