"""The PostgreSQL store's per-user HNSW index: used past the threshold (the plan shows it), the same answers
as the exact scan on a small set, kept by every write, dropped with its user."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memlane.core.model import Filters
from memlane.core.store.candidates.annsettings import EXACT, AnnSettings
from memlane.core.store.candidates.postgres_search import exact_pool, vector_top_blocks
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.postgres import ann
from memlane.core.store.postgres.adapt import PgVector
from memlane.core.store.postgres.store import PostgresStore

sys.path.insert(0, str(Path(__file__).parents[1] / "core" / "store" / "candidates"))
from test_sqlite_ann import T0, blocks_and_vectors, queries

pytestmark = pytest.mark.postgres
NewStore = Callable[..., PostgresStore]  # the new_store fixture (tests/postgres/conftest.py)
INLINE = AnnSettings(threshold=0, background=False)


def fill(store: object, user: str, n: int, seed: int = 1, start: int = 0) -> list[object]:
    blocks, vecs = blocks_and_vectors(user, n, seed, start)
    for s in range(0, n, 500):
        store.write_blocks(user, blocks[s : s + 500], vecs[s : s + 500])  # type: ignore[attr-defined]
    return list(blocks)


def test_past_the_threshold_searches_use_the_users_index(new_store: NewStore) -> None:
    store = new_store(ann=AnnSettings(threshold=300, background=False))
    fill(store, "small", 200)
    fill(store, "large", 400, seed=2)
    q = queries(1)[0]
    store.vector_candidates("small", q, 10)
    store.vector_candidates("large", q, 10)
    with store.transaction() as conn:
        names = dict(ann.indexes(conn))
        (large,) = conn.execute("SELECT id FROM users WHERE name = 'large'").fetchone()
        assert names == {ann.index_name(large): True}
        conn.execute("SET LOCAL enable_seqscan = off")
        ann.set_search(conn, store.ann_settings, 72)
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT block_pk FROM key_vectors WHERE user_id = %s::bigint "
                "ORDER BY embedding::vector(32) <#> %s LIMIT 72",
                (large, PgVector(q)),
            ).fetchall()
        )
    assert ann.index_name(large) in plan, plan


def test_the_index_answers_like_the_exact_scan_on_a_small_set(new_store: NewStore) -> None:
    store = new_store(ann=INLINE)
    exact = new_store(schema=store.schema, ann=EXACT)
    blocks = fill(store, "alice", 600)
    fill(store, "bob", 100, seed=2)
    filters: list[dict[str, float]] = [{}, {"after": T0.timestamp() + 60 * 100, "before": T0.timestamp() + 60 * 300}]
    for q in queries(10):
        for f in filters:
            got = store.vector_candidates("alice", q, 10, Scope(**f))  # type: ignore[arg-type]
            want = exact.vector_candidates("alice", q, 10, Scope(**f))  # type: ignore[arg-type]
            assert [pk for pk, _ in got] == [pk for pk, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    # Kept by every write: a new key equal to the query comes first, a deleted block never comes back.
    target = queries(1, seed=5)[0]
    new, _ = blocks_and_vectors("alice", 1, 3, start=5000)
    store.write_blocks("alice", new, target.reshape(1, -1))
    top = store.vector_candidates("alice", target, 1)[0][0]
    assert store.fetch_blocks("alice", [top])[top].id == new[0].id
    store.delete_block("alice", new[0].id)
    assert top not in dict(store.vector_candidates("alice", target, 10))
    assert len(blocks) == 600


def test_a_wide_filter_walks_the_index_and_finds_the_exact_filtered_answer(new_store: NewStore) -> None:
    """A filter keeping a third of a 1,000-key user is wider than the exact pool's bound (111 blocks at k =
    10): the search walks the user's HNSW index (its scan count moves) and returns the exact filtered top
    10. A filter keeping 5% has its pool scored exactly (the index is not read). Another user's keys are
    never candidates."""
    store = new_store(ann=INLINE)
    exact = new_store(schema=store.schema, ann=EXACT)
    fill(store, "alice", 1000)
    fill(store, "bob", 300, seed=2)
    assert store.build_index("alice").state == "ready"
    (alice,) = store.query("SELECT id FROM users WHERE name = 'alice'")[0]
    sessions = [f"s{i}" for i in range(100)]  # ten blocks each
    wide, narrow = Filters(sessions=tuple(sessions[::3])), Filters(sessions=tuple(sessions[:5]))
    assert 50 <= exact_pool(1000, True, 10) < 340

    (version,) = store.query("SELECT current_setting('server_version_num')::int")[0]
    if version < 150000:
        pytest.skip("counting the index's scans needs pg_stat_force_next_flush (PostgreSQL 15)")

    def index_scans() -> int:
        with store.transaction() as conn:
            row = conn.execute(
                "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelid = to_regclass(%s)",
                (ann.index_name(alice),),
            ).fetchone()
        return int(row[0])

    for q in queries(10):
        for f, walks in ((wide, True), (narrow, False)):
            before = index_scans()
            with store.transaction() as conn:
                got = vector_top_blocks(conn, "alice", q, 10, Scope(filters=f), ann=store.ann_settings)
                conn.execute("SELECT pg_stat_force_next_flush()")  # counted once the session is idle
            want = exact.vector_candidates("alice", q, 10, Scope(filters=f))
            assert (index_scans() > before) == walks
            assert [pk for pk, _ in got] == [pk for pk, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
            assert {b.session_id for b in store.fetch_blocks("alice", [pk for pk, _ in got]).values()} <= set(
                f.sessions or ()
            )


def test_deleting_the_user_drops_the_index(new_store: NewStore) -> None:
    store = new_store(ann=INLINE)
    fill(store, "alice", 100)
    fill(store, "bob", 100, seed=2)
    q = queries(1)[0]
    store.vector_candidates("alice", q, 10)
    store.vector_candidates("bob", q, 10)
    with store.transaction() as conn:
        assert len(dict(ann.indexes(conn))) == 2
    assert store.user_row_counts("alice")["ann_index"] == 1
    store.delete_user("alice")
    with store.transaction() as conn:
        (bob,) = conn.execute("SELECT id FROM users WHERE name = 'bob'").fetchone()
        assert dict(ann.indexes(conn)) == {ann.index_name(bob): True}
    assert set(store.user_row_counts("alice").values()) == {0}
    assert np.isfinite(store.vector_candidates("bob", q, 3)[0][1])


def test_without_builds_a_search_makes_no_index_and_build_index_does(new_store: NewStore) -> None:
    """``build=False`` (one `memlane` command): a search past the threshold starts no CREATE INDEX, which
    the process would not live to finish; build_index makes it, and the planner then uses it."""
    store = new_store(ann=AnnSettings(threshold=300, build=False))
    fill(store, "large", 400)
    fill(store, "small", 10, seed=2)
    q = queries(1)[0]
    store.vector_candidates("large", q, 10)
    with store.transaction() as conn:
        assert dict(ann.indexes(conn)) == {}
    assert [(s.user, s.needed, s.state) for s in store.index_status()] == [
        ("large", True, "none"),
        ("small", False, "none"),
    ]
    built = store.build_index("large")
    assert (built.state, built.keys, built.indexed) == ("ready", 400, 400)
    assert store.build_index("small").state == "none"  # below the threshold: no index
    with store.transaction() as conn:
        assert list(dict(ann.indexes(conn)).values()) == [True]


def test_close_cancels_a_running_build_and_drops_what_it_left(new_store: NewStore, pg_url: str) -> None:
    """A store closed while its CREATE INDEX CONCURRENTLY runs: the statement is cancelled on the server,
    its invalid index dropped, the thread waited for; nothing keeps running after the process."""
    import threading
    import time

    import psycopg

    store = new_store(ann=AnnSettings(threshold=0))
    fill(store, "alice", 200)
    with psycopg.connect(pg_url) as blocker:
        # A writer's open transaction: the build waits for it ("waiting for writers before build").
        blocker.execute(f"SET search_path TO {store.schema}")
        blocker.execute("LOCK TABLE key_vectors IN ROW EXCLUSIVE MODE")
        store.vector_candidates("alice", queries(1)[0], 10)
        (user_id,) = store.query("SELECT id FROM users WHERE name = 'alice'")[0]

        def building() -> bool:
            return bool(
                store.query(
                    "SELECT 1 FROM pg_stat_progress_create_index WHERE index_relid = to_regclass(%s)",
                    (ann.index_name(user_id),),
                )
            )

        deadline = time.monotonic() + 30
        while not building() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert building()
        closer = threading.Thread(target=store.close)
        closer.start()
        while building() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not building()  # cancelled on the server, while the writer still holds its transaction
        blocker.rollback()  # now the invalid index can be dropped
        closer.join(timeout=30)
        assert not closer.is_alive()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("memlane-pg-ann-")]
    reopened = new_store(schema=store.schema, ann=EXACT)
    with reopened.transaction() as conn:
        assert ann.index_state(conn, ann.index_name(user_id)) == "none"
    assert store.ann.errors == []
