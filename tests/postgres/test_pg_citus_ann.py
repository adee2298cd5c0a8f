"""A large user's approximate (HNSW) index on Citus: made on the one shard that holds the user, on that shard's
worker only; read by the user's searches, with the recall of one server; made anew on the user's new shard
after the shard is split off or moved (`memlane check` says so meanwhile); dropped with the user, and an index
left behind reported."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from memlane.core.store.candidates.annsettings import EXACT, AnnSettings
from memlane.core.store.candidates.postgres_search import vector_top_blocks
from memlane.core.store.postgres import citus
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.postgres.tenant import user_key

sys.path.insert(0, str(Path(__file__).parents[1] / "core" / "store" / "candidates"))
from test_sqlite_ann import blocks_and_vectors, queries

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
NewStore = Callable[..., PostgresStore]
INLINE = AnnSettings(threshold=300, background=False)


def fill(store: PostgresStore, user: str, n: int, seed: int) -> None:
    blocks, vecs = blocks_and_vectors(user, n, seed)
    for s in range(0, n, 500):
        store.write_blocks(user, blocks[s : s + 500], vecs[s : s + 500])


def indexes_on_nodes(store: PostgresStore) -> dict[str, list[tuple[str, str]]]:
    """Every node's approximate indexes of the store: (index, table) by node (host:port), the coordinator's
    under "coordinator"."""
    out: dict[str, list[tuple[str, str]]] = {}
    query = (
        "SELECT c.relname, t.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_class t ON t.oid = i.indrelid WHERE c.relnamespace = %s::regnamespace "
        "AND starts_with(c.relname, 'key_vectors_ann_u') ORDER BY 1"
    )
    out["coordinator"] = [(str(a), str(b)) for a, b in store.query(query, (store.schema,))]
    for node in citus.Cluster(store).nodes():
        with citus.worker(store, node) as conn:
            out[node] = [(str(a), str(b)) for a, b in conn.execute(query, (store.schema,)).fetchall()]
    return out


def index_scans(store: PostgresStore, node: str, index: str) -> int:
    with citus.worker(store, node) as conn:
        row = conn.execute("SELECT pg_stat_get_numscans(to_regclass(%s))", (index,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def exact_top(store: PostgresStore, user: str, q: object, k: int = 10) -> list[tuple[int, float]]:
    """The exact top k, through the coordinator (no index)."""
    with store.transaction() as conn:
        return vector_top_blocks(conn, user, q, k, ann=EXACT)  # type: ignore[arg-type]


def test_a_large_users_index_is_on_its_shard_alone_and_its_searches_read_it(new_citus_store: NewStore) -> None:
    store = new_citus_store(ann=INLINE)
    fill(store, "small", 200, 1)
    fill(store, "large", 1000, 2)
    fill(store, "other", 250, 3)
    q = queries(1)[0]
    assert store.index_status("large")[0].state == "none"
    store.vector_candidates("small", q, 10)
    store.vector_candidates("large", q, 10)  # past the threshold: the search makes the index (inline here)
    assert store.index_status("large")[0].state == "ready"
    _, node = citus.Cluster(store).where("large")
    (vectors_shard,) = store.query("SELECT get_shard_id_for_distribution_column('key_vectors', %s::bigint)",
                                   (user_key("large"),))[0]  # fmt: skip
    name = citus.ann_index(user_key("large"), int(vectors_shard))
    found = indexes_on_nodes(store)
    assert found.pop(node) == [(name, f"key_vectors_{vectors_shard}")]  # the user's shard, and no other
    assert all(v == [] for v in found.values()), found  # not on the coordinator, not on the other worker
    before = index_scans(store, node, name)
    deadline = time.monotonic() + 10
    hits = 0
    for q in queries(20):
        got = store.vector_candidates("large", q, 10)
        want = exact_top(store, "large", q)
        hits += len({pk for pk, _ in got} & {pk for pk, _ in want})
        assert all(s == pytest.approx(dict(want)[pk], abs=1e-6) for pk, s in got if pk in dict(want))
    while index_scans(store, node, name) == before:  # the worker's statistics arrive within a second or so
        assert time.monotonic() < deadline, "the searches did not read the index"
        time.sleep(0.2)
    assert hits / 200 >= 0.99
    check = store.check()
    assert check.ok and not [n for n in check.notes if "approximate index" in n], check


def test_recall_at_10_against_exact_is_that_of_one_server(pg_url: str, citus_url: str) -> None:
    """5,000 keys of one user past the threshold, the same on one server and on Citus: the index's top 10
    holds at least 99% of the exact top 10 on both (the figure in docs/scaling.md is measured this way)."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    settings = AnnSettings(threshold=1000, background=False)
    stores = [PostgresStore(url, schema=schema, pool_max=4, ann=settings) for url in (pg_url, citus_url)]
    try:
        recalls = []
        for store in stores:
            fill(store, "large", 5000, 7)
            assert store.build_index("large").state == "ready"
            hits = 0
            for q in queries(50, seed=5):
                got = {pk for pk, _ in store.vector_candidates("large", q, 10)}
                hits += len(got & {pk for pk, _ in exact_top(store, "large", q)})
            recalls.append(hits / 500)
        print(f"recall@10 against exact, 5,000 keys: one server {recalls[0]:.3f}, Citus {recalls[1]:.3f}")
        assert min(recalls) >= 0.99, recalls
    finally:
        for store, url in zip(stores, (pg_url, citus_url), strict=True):
            store.close()
            drop_schema(url, schema)


def test_a_split_or_moved_shard_gets_the_index_anew_from_the_next_search(new_citus_store: NewStore) -> None:
    """Citus makes a split or moved shard from the table's own definition, without the user's index: `memlane
    check` notes it, searches stay right (exact), and the next search makes the index on the new shard."""
    store = new_citus_store(ann=INLINE)
    fill(store, "large", 600, 2)
    fill(store, "other", 100, 3)
    cluster = citus.Cluster(store)
    q = queries(1)[0]
    store.vector_candidates("large", q, 10)
    want = exact_top(store, "large", q)

    def missing_noted() -> bool:
        return any("'large'" in n and "approximate index" in n for n in store.check().notes)

    assert not missing_noted()
    shard, node = cluster.where("large")
    isolated = cluster.isolate("large")
    assert isolated != shard and missing_noted()
    assert store.index_status("large")[0].state == "none"
    assert store.vector_candidates("large", q, 10) == want  # exact meanwhile; this one starts the build
    assert store.index_status("large")[0].state == "ready" and not missing_noted()
    target = next(n for n in cluster.nodes() if n != node)
    cluster.move(isolated, target)
    assert missing_noted()
    assert store.vector_candidates("large", q, 10) == want
    with store.dedicated() as conn:
        conn.execute("CALL citus_cleanup_orphaned_resources()")  # the shards left by the split and the move
    found = indexes_on_nodes(store)
    (vectors_shard,) = store.query("SELECT get_shard_id_for_distribution_column('key_vectors', %s::bigint)",
                                   (user_key("large"),))[0]  # fmt: skip
    name = citus.ann_index(user_key("large"), int(vectors_shard))
    assert found[target] == [(name, f"key_vectors_{vectors_shard}")]
    assert all(v == [] for n, v in found.items() if n != target), found
    check = store.check()
    assert check.ok and not missing_noted(), check


def test_the_index_goes_with_its_user_and_one_left_behind_is_a_problem(
    new_citus_store: NewStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_citus_store(ann=INLINE)
    for user, seed in (("ann", 1), ("bo", 2)):
        fill(store, user, 400, seed)
        assert store.build_index(user).state == "ready"
    assert store.user_row_counts("ann")["ann_index"] == 1
    store.delete_user("ann")
    assert store.user_row_counts("ann")["ann_index"] == 0
    assert store.check().ok
    monkeypatch.setattr(citus, "drop_ann", lambda store, user_id: None)  # the worker was unreachable, say
    store.delete_user("bo")
    problems = store.check().problems
    assert len(problems) == 1 and "its user was deleted" in problems[0], problems
