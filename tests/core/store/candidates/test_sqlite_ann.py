"""The SQLite store's approximate vector index: the same answers as the exact scan where it matters, kept in
step with adds and deletes, rebuilt after a crash, gone with its user."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane.core.errors import ConfigError, NotFoundError
from memlane.core.memory import new_block_id
from memlane.core.model import ExtractionStatus, MemoryBlock, PerspectiveMode, content_hash
from memlane.core.store.candidates.annsettings import EXACT, AnnSettings
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.sqlite.ann import folder
from memlane.core.timefmt import annotate, to_epoch

DIM = 32
T0 = datetime(2024, 1, 1, tzinfo=UTC)
INLINE = AnnSettings(threshold=0, background=False, ef_search=64)


def blocks_and_vectors(user: str, n: int, seed: int, start: int = 0) -> tuple[list[MemoryBlock], np.ndarray]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out = []
    for i in range(start, start + n):
        text = f"user: note {i} of {user}"
        ev = T0 + timedelta(minutes=i)
        out.append(
            MemoryBlock(
                id=new_block_id(), user=user, conversation_id="c", session_id=f"s{i // 10}", exchange_index=i % 10,
                perspective="exchange", mode=PerspectiveMode.SINGLE, message=text, event_time=ev, ingest_time=T0,
                time_annotation=annotate(ev), content_hash=content_hash(text), extraction_status=ExtractionStatus.OFF,
            )
        )  # fmt: skip
    return out, vecs


def fill(store: SqliteStore, user: str, n: int, seed: int = 1, start: int = 0) -> list[MemoryBlock]:
    blocks, vecs = blocks_and_vectors(user, n, seed, start)
    for s in range(0, n, 500):
        store.write_blocks(user, blocks[s : s + 500], vecs[s : s + 500])
    return blocks


def queries(n: int = 20, seed: int = 99) -> np.ndarray:
    q = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def recall(store: SqliteStore, exact: SqliteStore, user: str, k: int = 10, **filters: float) -> float:
    hits = 0
    for q in queries():
        got = {pk for pk, _ in store.vector_candidates(user, q, k, Scope(**filters))}  # type: ignore[arg-type]
        want = {pk for pk, _ in exact.vector_candidates(user, q, k, Scope(**filters))}  # type: ignore[arg-type]
        hits += len(got & want)
    return hits / (k * len(queries()))


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        AnnSettings(threshold=-1)
    with pytest.raises(ConfigError, match="ef_search"):
        AnnSettings(ef_search=1)
    assert not EXACT.applies(10**9) and AnnSettings(threshold=100).applies(100)
    assert not AnnSettings(threshold=100).applies(99)


def test_below_the_threshold_search_is_the_exact_scan(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=AnnSettings(threshold=3000, background=False))
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 2999)
    for q in queries(5):
        assert store.vector_candidates("alice", q, 10) == exact.vector_candidates("alice", q, 10)
    assert not folder(store.path).exists() and store.ann.state(1) == {"loaded": False}
    fill(store, "alice", 1, start=2999)  # now at the threshold: the index is built
    store.vector_candidates("alice", queries(1)[0], 10)
    assert store.ann.state(1)["loaded"] and len(list(folder(store.path).glob("u1-*.hnsw"))) == 1


def test_index_answers_like_the_exact_scan(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 3000)
    fill(store, "bob", 200, seed=2)
    assert recall(store, exact, "alice") >= 0.95
    assert store.ann.state(1)["keys"] == 3000
    # Scores of what it finds are the exact scores; filters apply as in the exact scan.
    q = queries(1)[0]
    assert dict(store.vector_candidates("alice", q, 5)).items() <= dict(exact.vector_candidates("alice", q, 50)).items()
    after, before = to_epoch(T0 + timedelta(minutes=1000)), to_epoch(T0 + timedelta(minutes=1100))
    got = store.vector_candidates("alice", q, 10, Scope(after=after, before=before))
    assert got == exact.vector_candidates("alice", q, 10, Scope(after=after, before=before))
    # bob's search never sees alice's keys (his own index holds only his)
    bobs = set(dict(exact.vector_candidates("bob", q, 500)))
    assert set(dict(store.vector_candidates("bob", q, 50))) <= bobs and len(bobs) == 200


def test_added_keys_are_found_before_and_after_the_index_catches_up(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    fill(store, "alice", 2000)
    store.vector_candidates("alice", queries(1)[0], 10)  # build
    generation = store.ann.state(1)["generation"]
    # A new key equal to the query must come first at once: it is past the watermark, scanned exactly.
    target = queries(1, seed=5)[0]
    blocks, _ = blocks_and_vectors("alice", 1, 3, start=5000)
    store.write_blocks("alice", blocks, target.reshape(1, -1))
    ref = store.vector_candidates("alice", target, 1)[0][0]
    assert store.fetch_blocks("alice", [ref])[ref].id == blocks[0].id
    assert store.ann.state(1)["generation"] == generation  # a short tail: no new index
    # Past TAIL_MAX new keys the index is extended and saved with a new watermark.
    from memlane.core.store.sqlite import ann

    fill(store, "alice", ann.TAIL_MAX + 10, seed=4, start=6000)
    store.vector_candidates("alice", target, 1)
    state = store.ann.state(1)
    assert state["generation"] == generation + 1 and state["keys"] == 2001 + ann.TAIL_MAX + 10
    assert store.vector_candidates("alice", target, 1)[0][0] == ref


def test_deleted_blocks_are_never_returned_and_force_a_rebuild(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    other = SqliteStore(tmp_path / "m.db", ann=INLINE)  # another process's view of the same file
    blocks = fill(store, "alice", 2000)
    q = queries(1)[0]
    first = store.vector_candidates("alice", q, 10)
    other.vector_candidates("alice", q, 10)
    by_pk = store.fetch_blocks("alice", [pk for pk, _ in first])
    for pk, _ in first[:5]:
        other.delete_block("alice", by_pk[pk].id)  # deleted by the other process
    again = {pk for pk, _ in store.vector_candidates("alice", q, 10)}
    assert not again & {pk for pk, _ in first[:5]}
    generation = store.ann.state(1)["generation"]
    for b in blocks[:450]:  # more than a fifth of the index: rebuilt without them
        store.delete_block("alice", b.id)
    store.vector_candidates("alice", q, 10)
    assert store.ann.state(1)["generation"] == generation + 1 and store.ann.state(1)["keys"] == 1545


@pytest.mark.parametrize("damage", ["deleted", "truncated", "stale watermark"])
def test_a_damaged_index_is_rebuilt(tmp_path: Path, damage: str) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 2000)
    store.vector_candidates("alice", queries(1)[0], 10)
    store.close()
    (path,) = folder(store.path).glob("u1-*.hnsw")
    if damage == "deleted":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    else:  # the row claims more keys than the file holds (a crash between two saves, say)
        with store.transaction() as conn:
            conn.execute("UPDATE ann_index SET keys = keys + 100, max_key_pk = max_key_pk + 100")
    reopened = SqliteStore(tmp_path / "m.db", ann=INLINE)
    assert recall(reopened, exact, "alice") >= 0.95
    state = reopened.ann.state(1)
    assert state["generation"] == 2 and state["keys"] == 2000
    (current,) = reopened.query("SELECT file FROM ann_index")[0]
    assert sorted(p.name for p in folder(store.path).glob("u1-*")) == [current, current.replace(".hnsw", ".labels")]


def test_deleting_the_user_removes_the_index(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    fill(store, "alice", 1500)
    fill(store, "bob", 1500, seed=2)
    q = queries(1)[0]
    store.vector_candidates("alice", q, 10)
    store.vector_candidates("bob", q, 10)
    assert len(list(folder(store.path).glob("*.hnsw"))) == 2
    store.delete_user("alice")
    assert {p.name.split("-")[0] for p in folder(store.path).glob("*")} == {"u2"}
    assert store.user_row_counts("alice")["ann_index"] == 0
    assert store.query("SELECT user_id FROM ann_index") == [(2,)]
    # A new alice starts without an index of the old one (ids may be reused; key pks are not).
    fill(store, "alice", 1200, seed=3)
    assert recall(store, SqliteStore(tmp_path / "m.db", ann=EXACT), "alice") >= 0.95
    (row,) = store.query("SELECT keys, generation FROM ann_index WHERE user_id != 2")
    assert row == (1200, 1)


def test_key_pks_are_never_reused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=EXACT)
    blocks = fill(store, "alice", 3)
    (top,) = store.query("SELECT max(pk) FROM search_keys")[0]
    store.delete_block("alice", blocks[-1].id)
    fill(store, "alice", 1, start=10)
    assert store.query("SELECT max(pk) FROM search_keys")[0][0] == top + 1


def test_in_the_background_searches_stay_exact_until_the_index_is_ready(tmp_path: Path) -> None:
    import time

    store = SqliteStore(tmp_path / "m.db", ann=AnnSettings(threshold=0))
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 1500)
    q = queries(1)[0]
    assert store.vector_candidates("alice", q, 10) == exact.vector_candidates("alice", q, 10)
    deadline = time.monotonic() + 60
    while not store.ann.state(1)["loaded"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.ann.state(1)["loaded"] and store.ann.errors == []
    assert recall(store, exact, "alice") >= 0.95


def test_memory_open_and_the_settings_hand_the_index_settings_to_the_store(tmp_path: Path) -> None:
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.memory import Memory
    from memlane.settings import load

    chosen = AnnSettings(threshold=7, ef_search=64)
    mem = Memory.open(tmp_path / "a.db", embedder=HashingEmbedder(), ann=chosen)
    try:
        assert isinstance(mem.store, SqliteStore) and mem.store.ann_settings == chosen
    finally:
        mem.close()
    # MEMLANE_ANN_THRESHOLD / MEMLANE_ANN_EF_SEARCH reach every store the command line opens; -1: never.
    options = load({"MEMLANE_ANN_THRESHOLD": "-1", "MEMLANE_ANN_EF_SEARCH": "200"}).memory_options()
    assert options["ann"] == AnnSettings(threshold=None, ef_search=200)
    mem = Memory.open(tmp_path / "b.db", embedder=HashingEmbedder(), **options)
    try:
        assert isinstance(mem.store, SqliteStore) and mem.store.ann_settings.threshold is None
    finally:
        mem.close()
    assert load({}).ann_settings() == AnnSettings()  # the defaults are the store's own


def test_close_stops_a_background_build_between_batches(tmp_path: Path) -> None:
    """A store closed (or a process ending) while a build runs: the build stops before its next batch,
    close() waits for it, and nothing half-made is saved."""
    import threading

    from memlane.core.store.sqlite import ann

    store = SqliteStore(tmp_path / "m.db", ann=AnnSettings(threshold=0))
    fill(store, "alice", 12 * ann.BATCH)
    store.vector_candidates("alice", queries(1)[0], 10)  # starts the build on its thread
    store.close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("memlane-ann-")]
    assert store.ann.errors == [] and store.query("SELECT count(*) FROM ann_index") == [(0,)]
    assert not folder(store.path).exists() or not list(folder(store.path).iterdir())
    # A closed store's searches start no build; they stay exact.
    store.vector_candidates("alice", queries(1)[0], 10)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("memlane-ann-")]


def test_without_builds_searches_use_the_saved_index_and_build_none(tmp_path: Path) -> None:
    """``build=False`` (one `memlane` command): a search never builds, extends or rebuilds; it loads the
    saved index, which build_index makes and brings up to date."""
    from memlane.core.store.sqlite import ann

    settings = AnnSettings(threshold=1000, build=False)
    store = SqliteStore(tmp_path / "m.db", ann=settings)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 2000)
    fill(store, "bob", 10, seed=2)
    q = queries(1)[0]
    assert store.vector_candidates("alice", q, 10) == exact.vector_candidates("alice", q, 10)
    assert not folder(store.path).exists() and store.ann.state(1) == {"loaded": False}
    assert [(s.user, s.needed, s.state) for s in store.index_status()] == [
        ("alice", True, "none"),
        ("bob", False, "none"),
    ]

    built = store.build_index("alice")
    assert (built.state, built.indexed, built.tail) == ("ready", 2000, 0)
    assert store.build_index("bob").state == "none"  # below the threshold: searched exactly, no index
    later = SqliteStore(tmp_path / "m.db", ann=settings)  # the next command
    assert recall(later, exact, "alice") >= 0.95
    assert later.ann.state(1)["loaded"] and later.ann.state(1)["generation"] == 1

    # Keys added past what an index-building search would extend: still found, and nothing is built.
    target = queries(1, seed=5)[0]
    new, _ = blocks_and_vectors("alice", 1, 3, start=9000)
    store.write_blocks("alice", new, target.reshape(1, -1))
    fill(store, "alice", ann.TAIL_MAX + 10, seed=4, start=10_000)
    third = SqliteStore(tmp_path / "m.db", ann=settings)
    top = third.vector_candidates("alice", target, 1)[0][0]
    assert third.fetch_blocks("alice", [top])[top].id == new[0].id
    assert third.ann.state(1)["generation"] == 1
    stale = third.index_status("alice")[0]
    assert (stale.state, stale.tail) == ("stale", ann.TAIL_MAX + 11)
    caught_up = third.build_index("alice")
    assert (caught_up.state, caught_up.indexed, caught_up.tail) == ("ready", 2000 + ann.TAIL_MAX + 11, 0)
    with pytest.raises(NotFoundError):
        third.build_index("carol")


def test_a_graph_that_cannot_answer_falls_back_to_the_exact_scan(tmp_path: Path) -> None:
    """hnswlib raises when its graph cannot reach k elements (seen with a 100k-block user made of many
    copies of the same vectors): the search answers exactly instead of failing."""
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 3000)
    q = queries(1)[0]
    store.vector_candidates("alice", q, 10)  # builds and loads the index
    loaded = store.ann._loaded[1]

    class Unreachable:
        def __getattr__(self, name: str) -> object:
            return getattr(loaded_index, name)

        def knn_query(self, *_a: object, **_k: object) -> object:
            raise RuntimeError("Cannot return the results in a contiguous 2D array. Probably ef or M is too small")

    loaded_index = loaded.index
    loaded.index = Unreachable()
    assert store.vector_candidates("alice", q, 10) == exact.vector_candidates("alice", q, 10)
