"""The SQLite store's keyword index: BM25 equal to FTS5's, statistics kept exact by every write and delete,
and the migration that builds it from a store that had only the FTS5 index."""

from __future__ import annotations

import math
import random
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_downgrade import downgrade_to_v2

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import StoreError
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.sqlite import terms as terms_module
from memlane.core.store.sqlite.base import PAGE_SIZE

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
WORDS = [
    "garden",
    "tomato",
    "planting",
    "planted",
    "river",
    "kayak",
    "kayaking",
    "paddle",
    "violin",
    "lesson",
    "lessons",
    "teacher",
    "sister",
    "restaurant",
    "sushi",
    "dinner",
    "birthday",
    "marathon",
    "running",
    "runner",
    "shoes",
    "budget",
    "savings",
    "trip",
    "Lisbon",
    "museum",
    "painting",
    "painted",
    "café",
    "coffee",
    "morning",
    "evening",
    "dog",
    "walking",
    "walked",
]
QUERIES = [
    "when did I plant the tomatoes in my garden?",
    "kayaking on the river with my sister",
    "violin teacher lessons",
    "sushi restaurant for the birthday dinner",
    "marathon running shoes budget",
    "did I run in the running shoes?",  # two words, one stem: counted twice, as FTS5 counts two phrases
    "Lisbon museum painting café",
    "xylophone",  # known to no key
]


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def fill(mem: Memory, user: str, seed: int, n: int = 12) -> None:
    rng = random.Random(seed)
    for i in range(n):
        said = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))
        reply = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 25)))
        mem.add(user, chat(said, reply) if reply else chat(said), session_id=f"s{i % 4}", time=T0 + timedelta(days=i))


def fts5_bm25(store: SqliteStore, user: str, query: str, k: int) -> list[tuple[int, float]]:
    """The reference: SQLite's FTS5 bm25() over every user's keys, restricted to ``user``'s rows."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE ref USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    rows = store.query("SELECT k.pk, k.text FROM search_keys k")
    conn.executemany("INSERT INTO ref(rowid, text) VALUES (?, ?)", rows)
    mine = {int(pk): int(b) for pk, b in store.query(
        "SELECT k.pk, k.block_pk FROM search_keys k JOIN users u ON u.id = k.user_id WHERE u.name = ?", (user,)
    )}  # fmt: skip
    from memlane.core.store.candidates.keyword import query_terms

    match = " OR ".join(f'"{w}"' for w in query_terms(query))
    best: dict[int, float] = {}
    for pk, score in conn.execute("SELECT rowid, -bm25(ref) FROM ref WHERE ref MATCH ? ORDER BY 2 DESC", (match,)):
        if int(pk) in mine:
            best.setdefault(mine[int(pk)], float(score))
    return sorted(best.items(), key=lambda x: -x[1])[:k]


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    return Memory(SqliteStore(tmp_path / "store.db"), HashingEmbedder(dim=32))


def test_bm25_equals_fts5(mem: Memory) -> None:
    fill(mem, "alice", seed=1)
    fill(mem, "bob", seed=2)  # statistics are global: bob's keys change alice's scores, as in FTS5
    for query in QUERIES:
        ours = mem.store.keyword_candidates("alice", query, 10)
        ref = fts5_bm25(mem.store, "alice", query, 10)  # type: ignore[arg-type]
        assert [b for b, _ in ours] == [b for b, _ in ref], query
        assert [s for _, s in ours] == pytest.approx([s for _, s in ref], rel=1e-9), query
    assert mem.store.keyword_candidates("alice", "xylophone", 10) == []


def reference_bm25(store: SqliteStore, user: str, query: str, k1: float, b: float) -> list[tuple[int, float]]:
    """BM25 written out from its definition over FTS5's own tokens, for any k1 and b."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE ref USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE ref_v USING fts5vocab(ref, 'instance')")
    conn.executemany("INSERT INTO ref(rowid, text) VALUES (?, ?)", store.query("SELECT pk, text FROM search_keys"))
    tf: dict[int, dict[str, int]] = {}
    for doc, term in conn.execute("SELECT doc, term FROM ref_v"):
        tf.setdefault(int(doc), {}).setdefault(str(term), 0)
        tf[int(doc)][str(term)] += 1
    n = len(store.query("SELECT pk FROM search_keys"))
    avgdl = sum(sum(c.values()) for c in tf.values()) / n
    from memlane.core.store.candidates.keyword import query_terms
    from memlane.core.store.sqlite.terms import tokenize

    stems = tokenize(conn, [" ".join(query_terms(query))])[0]
    mine = dict(store.query(
        "SELECT k.pk, k.block_pk FROM search_keys k JOIN users u ON u.id = k.user_id WHERE u.name = ?", (user,)
    ))  # fmt: skip
    best: dict[int, float] = {}
    for pk in sorted(mine):
        counts = tf.get(pk, {})
        if not any(t in counts for t in stems):
            continue
        dl = sum(counts.values())
        score = 0.0
        for term, times in stems.items():
            df = sum(1 for c in tf.values() if term in c)
            if term in counts:
                idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
                f = counts[term]
                score += times * idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
        block = int(mine[pk])
        best[block] = max(best.get(block, 0.0), score)
    return sorted(best.items(), key=lambda x: -x[1])


@pytest.mark.parametrize(("k1", "b"), [(1.2, 0.75), (1.2, 0.5), (0.6, 0.3), (2.0, 1.0), (1.2, 0.0)])
def test_bm25_parameters_follow_the_definition(mem: Memory, k1: float, b: float) -> None:
    fill(mem, "alice", seed=11)
    fill(mem, "bob", seed=12)
    for query in QUERIES:
        ours = mem.store.keyword_candidates("alice", query, 100, k1=k1, b=b)
        ref = reference_bm25(mem.store, "alice", query, k1, b)  # type: ignore[arg-type]
        assert dict(ours) == pytest.approx(dict(ref), rel=1e-9), query
        assert [s for _, s in ours] == sorted((s for _, s in ours), reverse=True)


def test_statistics_stay_exact_through_writes_and_deletes(mem: Memory) -> None:
    rng = random.Random(7)
    users = ["alice", "bob", "carol"]
    for u in users:
        fill(mem, u, seed=hash(u) % 1000, n=5)
    for step in range(30):
        u = rng.choice(users)
        action = rng.random()
        blocks = mem.list(u) if u in {x.name for x in mem.users()} else []
        if action < 0.5 or not blocks:
            fill(mem, u, seed=step, n=2)
        elif action < 0.85:
            mem.delete(u, rng.choice(blocks).id)
        else:
            mem.delete_user(u)
        assert mem.store.integrity_check() == [], step
        # the cached index (extended or dropped by each write) ranks like one loaded from the file
        fresh = SqliteStore(mem.store.path)  # type: ignore[attr-defined]
        for q in QUERIES[:3]:
            assert mem.store.keyword_candidates(u, q, 5) == fresh.keyword_candidates(u, q, 5)
        fresh.close()


def test_terms_no_key_holds_are_deleted(mem: Memory) -> None:
    mem.add("alice", chat("my quokkazanzibar sings"))
    mem.add("bob", chat("tea sings"))

    def holding(word: str) -> list[tuple[int]]:
        return mem.store.query("SELECT count(*) FROM search_keys WHERE text LIKE ?", (f"%{word}%",))

    assert mem.store.query("SELECT df FROM terms WHERE term = 'sing'") == holding("sings") != [(0,)]
    mem.delete_user("alice")
    assert mem.store.query("SELECT count(*) FROM terms WHERE term LIKE 'quokka%'") == [(0,)]
    assert mem.store.query("SELECT df FROM terms WHERE term = 'sing'") == holding("sings") != [(0,)]
    assert mem.store.integrity_check() == []


def test_integrity_check_finds_a_drifted_statistic(mem: Memory) -> None:
    fill(mem, "alice", seed=3, n=3)
    with mem.store.transaction() as conn:  # type: ignore[attr-defined]
        conn.execute("UPDATE terms SET df = df + 1 WHERE id = (SELECT min(id) FROM terms)")
        conn.execute("UPDATE corpus SET tokens = tokens + 5")
    problems = mem.store.integrity_check()
    assert any("1 terms with a wrong document frequency" in p for p in problems)
    assert any("corpus says" in p for p in problems)


@pytest.mark.parametrize("small", [False, True], ids=["one-batch", "batches-memo-cleared"])
def test_migration_builds_the_index_from_an_fts5_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: bool
) -> None:
    if small:  # keys read a few at a time, the memo of term bags forgotten between batches
        monkeypatch.setattr(terms_module, "BACKFILL_BATCH", 3)  # odd: a dual pair of equal keys spans batches
        monkeypatch.setattr(terms_module, "BACKFILL_MEMO_MAX", 2)
    path = tmp_path / "store.db"
    mem = Memory(SqliteStore(path), HashingEmbedder(dim=32))
    fill(mem, "alice", seed=4)
    fill(mem, "bob", seed=4)  # the same texts again: tokenized once per content hash
    fill(mem, "bob", seed=5, n=3)
    before = {(u, q): mem.store.keyword_candidates(u, q, 10) for u in ("alice", "bob") for q in QUERIES}
    stats = mem.store.query("SELECT term, df FROM terms ORDER BY term"), mem.store.query("SELECT * FROM corpus")
    mem.close()
    downgrade_to_v2(path)

    migrated = Memory(SqliteStore(path), HashingEmbedder(dim=32))
    assert migrated.store.query("SELECT count(*) FROM sqlite_master WHERE name = 'keys_fts'") == [(0,)]
    assert migrated.store.integrity_check() == []
    assert (
        migrated.store.query("SELECT term, df FROM terms ORDER BY term"),
        migrated.store.query("SELECT * FROM corpus"),
    ) == stats
    after = {(u, q): migrated.store.keyword_candidates(u, q, 10) for u in ("alice", "bob") for q in QUERIES}
    assert after == before


def test_new_stores_use_large_pages_and_compact_converts_old_ones(tmp_path: Path) -> None:
    assert SqliteStore(tmp_path / "new.db").page_size() == PAGE_SIZE
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as raw:  # a store created before PAGE_SIZE: 4 KiB pages
        raw.execute("PRAGMA page_size = 4096")
        raw.execute("PRAGMA journal_mode = WAL")
    mem = Memory(SqliteStore(path), HashingEmbedder(dim=32))
    assert mem.store.page_size() == 4096  # type: ignore[attr-defined]
    fill(mem, "alice", seed=8)
    fill(mem, "bob", seed=9)
    mem.delete_user("bob")
    before = {q: [(h.block.id, h.score) for h in mem.search("alice", q, k=5)] for q in QUERIES}

    other = SqliteStore(path)  # another connection on the file: compacting must refuse, and change nothing
    other.query("SELECT 1")
    with pytest.raises(StoreError, match="another connection"):
        mem.store.compact()  # type: ignore[attr-defined]
    other.close()

    old_size, new_size = mem.store.compact()  # type: ignore[attr-defined]
    assert old_size > 0 and new_size == path.stat().st_size  # a tiny store grows: one 16 KiB page per table
    assert mem.store.page_size() == PAGE_SIZE  # type: ignore[attr-defined]
    assert mem.store.query("PRAGMA journal_mode") == [("wal",)]
    assert mem.store.integrity_check() == []
    assert {q: [(h.block.id, h.score) for h in mem.search("alice", q, k=5)] for q in QUERIES} == before
    mem.close()
    reopened = Memory(SqliteStore(path), HashingEmbedder(dim=32))
    assert {q: [(h.block.id, h.score) for h in reopened.search("alice", q, k=5)] for q in QUERIES} == before


MIXED = [
    "don't stop_me now, it's 10:30am and 3pm",
    "I’m “quoted” — with a dash… and emoji 😀smiles",
    "café naïve résumé",  # letters with accents: FTS5's own path
    "e\u0301cole",  # a combining mark
    "CJK 漢字テスト mixed with English",
    "priv\ue000ate use",
    "a\u200bzero width",
    "tab\tnew\nline ¼ Ⅻ",
    "x" * 70 + " running runs ran",
    "",
    "!!! ???",
]


def test_tokens_equal_fts5s_on_every_kind_of_text(tmp_path: Path) -> None:
    from memlane.core.store.sqlite.tokenizer import tokenize

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE ref USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE ref_v USING fts5vocab(ref, 'instance')")
    conn.executemany("INSERT INTO ref(rowid, x) VALUES (?, ?)", list(enumerate(MIXED)))
    expected: list[dict[str, int]] = [{} for _ in MIXED]
    for doc, term in conn.execute("SELECT doc, term FROM ref_v"):
        expected[doc][term] = expected[doc].get(term, 0) + 1
    work = sqlite3.connect(":memory:")
    assert [dict(b) for b in tokenize(work, MIXED)] == expected
    assert [dict(b) for b in tokenize(work, MIXED)] == expected  # again, from the memo of stems


def test_a_term_deleted_by_another_process_is_not_reused_from_a_stale_memo(tmp_path: Path) -> None:
    first = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=32))
    second = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=32))
    first.add("alice", chat("zanzibarquokka sings"))  # first's memo learns nothing new yet (a new term)
    first.add("alice", chat("zanzibarquokka again"))  # now it knows the term's id
    second.delete_user("alice")  # the term goes; its id may be handed out again
    second.add("bob", chat("albatrossology is new"))
    first.add("carol", chat("zanzibarquokka returns, albatrossology too"))
    assert first.store.integrity_check() == []
    for mem in (first, second):
        hits = mem.search("carol", "zanzibarquokka", k=5, mode="keyword")
        assert hits and all("zanzibarquokka" in h.block.message for h in hits)
        assert all("albatrossology" in h.block.message for h in mem.search("bob", "albatrossology", k=5))


def test_a_search_looks_its_query_up_once_and_any_write_makes_it_look_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.core.store.candidates import sqlite as store_module

    calls: list[str] = []
    real = store_module.query_weights

    def counted(conn: sqlite3.Connection, text: str) -> tuple[list[tuple[int, float]], float]:
        calls.append(text)
        return real(conn, text)

    monkeypatch.setattr(store_module, "query_weights", counted)
    first = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=32))
    second = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=32))
    fill(first, "alice", seed=1)
    query = "violin teacher lessons"

    def fresh() -> tuple[list[tuple[int, float]], float]:
        return real(first.store._conn(), query)  # type: ignore[attr-defined]

    first.search("alice", query, k=5)  # keyword candidates, then the session-words ranking
    assert calls == [query]
    before = fresh()
    first.add("alice", chat("violin violin teacher"))  # this connection's own write
    assert first.store._query_weights(query) == fresh() != before  # type: ignore[attr-defined]
    assert calls[-1] == query and len(calls) == 2
    second.add("bob", chat("a teacher of lessons"))  # another connection's commit
    moved = first.store._query_weights(query)  # type: ignore[attr-defined]
    assert len(calls) == 3 and moved == fresh()
    first.search("alice", "something else entirely", k=5)
    first.store._query_weights(query)  # type: ignore[attr-defined]
    assert len(calls) == 5  # one query remembered per thread: the last one


def test_query_weights_read_the_corpus_and_the_terms_from_one_snapshot(tmp_path: Path) -> None:
    """Another connection's commit between the read of the corpus size and the read of the terms' document
    frequencies must not give a term more keys than its corpus (a NaN idf, so NaN scores, under load)."""
    first = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=32))
    second = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(dim=32))
    first.add("alice", chat("a zebra at the zoo"))
    conn = first.store._conn()  # type: ignore[attr-defined]
    committed: list[str] = []

    def commit_during_the_term_lookup(sql: str) -> None:
        if "FROM terms WHERE term IN" in sql and not committed:
            committed.append(sql)
            for i in range(6):
                second.add("bob", chat(f"zebra {i}", f"zebra stripes {i}"))

    conn.set_trace_callback(commit_during_the_term_lookup)
    try:
        weights, avgdl = terms_module.query_weights(conn, "zebra")
    finally:
        conn.set_trace_callback(None)
    assert committed, "the lookup ran no statement to interleave with: nothing tested"
    assert weights and all(math.isfinite(w) and w > 0 for _, w in weights), weights
    assert math.isfinite(avgdl) and avgdl > 0


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc (Linux)")
def test_the_connection_of_an_ended_thread_is_closed(tmp_path: Path) -> None:
    """A server's thread pool ends idle threads and starts new ones; each thread's connection must not
    outlive it, or a long-running process runs out of file descriptors."""
    db = tmp_path / "threads.db"
    mem = Memory(SqliteStore(db), HashingEmbedder(dim=32))
    mem.add("alice", chat("a zebra at the zoo"))

    def open_files() -> int:
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if str(fd.resolve(strict=False)) == str(db.resolve()))

    def one_search() -> None:
        assert mem.search("alice", "zebra", k=1)

    for _ in range(30):
        t = threading.Thread(target=one_search)
        t.start()
        t.join()
    try:
        assert open_files() <= 3, f"{open_files()} connections open after 30 threads came and went"
    finally:
        mem.close()
    assert open_files() == 0
