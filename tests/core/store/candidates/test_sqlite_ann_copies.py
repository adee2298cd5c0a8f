"""The SQLite store's approximate index over users whose blocks repeat the same vectors (the same texts
stored again and again): one graph node per distinct vector, expanded into its copies, finds what the
exact scan finds, with filters, deletions, updates, expiry, extension and saved files."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memlane.core.memory import new_block_id
from memlane.core.model import ExtractionStatus, Filters, MemoryBlock, PerspectiveMode, content_hash
from memlane.core.store.blocks import BlockUpdate
from memlane.core.store.candidates.annsettings import EXACT, AnnSettings
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.candidates.vectors import UserMatrix
from memlane.core.store.expiry import TtlChange
from memlane.core.store.sqlite import SqliteStore, ann
from memlane.core.store.sqlite.ann import folder
from memlane.core.store.sqlite.annnodes import KeyMap, first_copies, map_path
from memlane.core.store.sqlite.annscrub import labels_path
from memlane.core.timefmt import annotate, to_epoch

DIM = 32
DISTINCT = 300
PASSES = 20
T0 = datetime(2024, 1, 1, tzinfo=UTC)
INLINE = AnnSettings(threshold=0, background=False, ef_search=64)
SHARES = {"share_10": 0.1, "share_50": 0.5}


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


BASE = unit(np.random.default_rng(11), DISTINCT)


def block(user: str, i: int, rng: np.random.Generator) -> MemoryBlock:
    text = f"user: repeated note {i % DISTINCT}"
    ev = T0 + timedelta(minutes=i)
    return MemoryBlock(
        id=new_block_id(), user=user, conversation_id="c", session_id=f"s{i // 20}", exchange_index=i % 20,
        perspective="exchange", mode=PerspectiveMode.SINGLE, message=text, event_time=ev, ingest_time=T0,
        time_annotation=annotate(ev), content_hash=content_hash(text), extraction_status=ExtractionStatus.OFF,
        annotations={key: "in" if rng.random() < share else "out" for key, share in SHARES.items()},
    )  # fmt: skip


def fill(store: SqliteStore, user: str, start: int, stop: int, vectors: np.ndarray | None = None) -> list[MemoryBlock]:
    """Blocks ``start..stop``: block ``i`` carries ``BASE[i % DISTINCT]`` (or ``vectors[i - start]``)."""
    rng = np.random.default_rng(start)
    blocks = [block(user, i, rng) for i in range(start, stop)]
    vecs = BASE[np.arange(start, stop) % DISTINCT] if vectors is None else vectors
    for s in range(0, len(blocks), 1000):
        store.write_blocks(user, blocks[s : s + 1000], vecs[s : s + 1000])
    return blocks


def queries(n: int = 20, seed: int = 99) -> np.ndarray:
    """Random directions, and copies of stored vectors (ties among all their copies)."""
    return np.concatenate([unit(np.random.default_rng(seed), n), BASE[:: DISTINCT // 5]])


def tie_aware(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> float:
    """The share of the exact answer found, a block scoring at least the exact last's counting as found
    (copies of one vector are interchangeable)."""
    if not want:
        return 1.0 if not got else 0.0
    floor = want[-1][1] - 1e-5
    ids = {pk for pk, _ in want}
    return min(1.0, sum(1 for pk, score in got if pk in ids or score >= floor) / len(want))


def recall(store: SqliteStore, exact: SqliteStore, user: str, k: int, filters: Filters | None = None) -> float:
    found = []
    for q in queries():
        want = exact.vector_candidates(user, q, k, Scope(filters=filters))
        found.append(tie_aware(store.vector_candidates(user, q, k, Scope(filters=filters)), want))
    return float(np.mean(found))


def matrix_of(store: SqliteStore, user: str) -> UserMatrix:
    row = store._user_row(user)
    assert row is not None
    return store._matrix(*row)


@pytest.mark.parametrize("k", [10, 50])
def test_repeated_vectors_are_found_as_the_exact_scan_finds_them(tmp_path: Path, k: int) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 0, DISTINCT * PASSES)
    assert recall(store, exact, "alice", k) == 1.0
    state = store.ann.state(1)
    assert (state["keys"], state["nodes"], state["mapped"]) == (DISTINCT * PASSES, DISTINCT, True)
    for key in SHARES:  # 10% and 50% of the blocks: through the index, its nodes' copies filtered
        assert recall(store, exact, "alice", k, Filters(annotations={key: "in"})) == 1.0
    after, before = to_epoch(T0 + timedelta(minutes=1000)), to_epoch(T0 + timedelta(minutes=4000))
    q = queries()[0]
    got = store.vector_candidates("alice", q, k, Scope(after=after, before=before))
    assert tie_aware(got, exact.vector_candidates("alice", q, k, Scope(after=after, before=before))) == 1.0


def test_deleted_updated_and_expired_copies_are_never_returned(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    blocks = fill(store, "alice", 0, DISTINCT * PASSES)
    q0, q1 = BASE[0], BASE[1]
    store.vector_candidates("alice", q0, 10)  # builds the index
    copies = [b for i, b in enumerate(blocks) if i % DISTINCT == 0]  # the 20 blocks carrying BASE[0]
    deleted, updated, expired, kept = copies[:5], copies[5:10], copies[10:15], copies[15:]
    for b in deleted:
        store.delete_block("alice", b.id)
    now = to_epoch(T0 + timedelta(days=1))
    for b in updated:  # now a copy of BASE[1]: a new key past the index's watermark
        text = "user: repeated note 1"
        new = dataclasses.replace(b, message=text, content_hash=content_hash(text))
        store.update_block("alice", new, BASE[1].reshape(1, -1), BlockUpdate(), now=now)
    assert store.set_ttl("alice", TtlChange(60, block_ids=[b.id for b in expired], now=now)) == len(expired)
    later = now + 120
    every = [pk for pk, _ in exact.vector_candidates("alice", q0, DISTINCT * PASSES)]
    ids = {pk: b.id for pk, b in store.fetch_blocks("alice", every).items()}
    got = store.vector_candidates("alice", q0, 10, Scope(now=later))
    assert {ids[pk] for pk, _ in got[:5]} == {b.id for b in kept}
    assert not {ids[pk] for pk, _ in got} & {b.id for b in deleted + updated + expired}
    assert got == exact.vector_candidates("alice", q0, 10, Scope(now=later))
    # The updated blocks are found as copies of their new vector (their keys are in the tail), with
    # BASE[1]'s twenty indexed copies.
    near = store.vector_candidates("alice", q1, 25, Scope(now=later))
    assert {b.id for b in updated} <= {b.id for b in store.fetch_blocks("alice", [pk for pk, _ in near]).values()}
    assert tie_aware(near, exact.vector_candidates("alice", q1, 25, Scope(now=later))) == 1.0
    assert store.ann.state(1)["generation"] == 1  # ten keys retired of 6,000: no rebuild


def test_new_copies_join_their_vector_s_node_when_the_index_is_extended(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    first = fill(store, "alice", 0, DISTINCT * PASSES)
    store.vector_candidates("alice", BASE[0], 10)
    assert store.ann.state(1)["nodes"] == DISTINCT
    # Past TAIL_MAX new keys: copies of the stored vectors, and 20 vectors never seen (each twice).
    more = DISTINCT * PASSES + ann.TAIL_MAX
    fill(store, "alice", DISTINCT * PASSES, more)
    fresh = unit(np.random.default_rng(5), 20)
    fill(store, "alice", more, more + 40, np.concatenate([fresh, fresh]))
    store.vector_candidates("alice", BASE[0], 10)
    state = store.ann.state(1)
    assert state["generation"] == 2 and state["keys"] == more + 40
    assert (state["nodes"], state["mapped"]) == (DISTINCT + 20, True)
    assert recall(store, exact, "alice", 10) == 1.0
    assert recall(store, exact, "alice", 10, Filters(annotations={"share_10": "in"})) == 1.0
    top = store.vector_candidates("alice", fresh[3], 2)
    assert [s for _, s in top] == pytest.approx([1.0, 1.0], abs=1e-2)
    # Every key BASE[0]'s node was built from is deleted: the copies that joined it later are still found.
    for b in first[::DISTINCT]:
        store.delete_block("alice", b.id)
    got = store.vector_candidates("alice", BASE[0], 10)
    assert got == exact.vector_candidates("alice", BASE[0], 10)
    assert len(got) == 10 and all(s == pytest.approx(1.0, abs=1e-2) for _, s in got)


def beside(index_file: str) -> list[str]:
    """An index file with its map and its labels (memlane.core.store.sqlite.annscrub)."""
    return [index_file, map_path(Path(index_file)).name, labels_path(Path(index_file)).name]


def test_the_map_is_saved_beside_the_index_and_goes_with_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 0, DISTINCT * PASSES)
    fill(store, "bob", 0, 2000, unit(np.random.default_rng(3), 2000))  # distinct vectors: no map
    store.vector_candidates("alice", BASE[0], 10)
    store.vector_candidates("bob", BASE[0], 10)
    (file,) = store.query("SELECT file FROM ann_index WHERE user_id = 1")[0]
    assert sorted(p.name for p in folder(store.path).glob("u1-*")) == sorted(beside(file))
    assert sorted(p.suffix for p in folder(store.path).glob("u2-*")) == [".hnsw", ".labels"]
    assert not store.ann.state(2)["mapped"] and store.ann.state(2)["nodes"] == 2000

    # Another process loads the index and its map: nothing is rebuilt, the answers are the exact ones.
    other = SqliteStore(tmp_path / "m.db", ann=INLINE)
    assert recall(other, exact, "alice", 10) == 1.0
    state = other.ann.state(1)
    assert (state["generation"], state["nodes"], state["mapped"]) == (1, DISTINCT, True)

    # A rebuild replaces both files.
    with store.transaction() as conn:
        conn.execute("UPDATE ann_index SET deleted = keys WHERE user_id = 1")
    store.vector_candidates("alice", BASE[0], 10)
    (again,) = store.query("SELECT file FROM ann_index WHERE user_id = 1")[0]
    assert again != file
    assert sorted(p.name for p in folder(store.path).glob("u1-*")) == sorted(beside(again))

    # A lost map: the index no longer says which keys its nodes stand for; it is rebuilt.
    map_path(folder(store.path) / again).unlink()
    third = SqliteStore(tmp_path / "m.db", ann=INLINE)
    assert recall(third, exact, "alice", 10) == 1.0
    assert third.ann.state(1)["generation"] == 3 and third.ann.state(1)["mapped"]

    store.delete_user("alice")
    assert {p.name.split("-")[0] for p in folder(store.path).glob("*")} == {"u2"}


def write_one_node_per_key(store: SqliteStore, user_id: int, matrix: UserMatrix) -> str:
    """What the release before shared nodes saved: every key a node of its own, labelled by its pk, no map."""
    import hnswlib

    index = hnswlib.Index(space="ip", dim=DIM)
    index.init_index(max_elements=matrix.n, M=16, ef_construction=100, random_seed=7)
    index.add_items(matrix.vectors.astype(np.float32) * matrix.scales[:, None], matrix.key_pks)
    (file,) = store.query("SELECT file FROM ann_index WHERE user_id = ?", (user_id,))[0]
    base = folder(store.path)
    index.save_index(str(base / file))
    map_path(base / file).unlink(missing_ok=True)
    return str(file)


def test_an_index_saved_without_a_map_still_answers_and_is_rebuilt_when_keys_repeat(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    fill(store, "alice", 0, DISTINCT * PASSES)
    store.vector_candidates("alice", BASE[0], 10)
    store.close()
    old = write_one_node_per_key(store, 1, matrix_of(exact, "alice"))

    # A process that builds nothing uses it as it is: one key per node, every answer a live key with its
    # exact score.
    frozen = SqliteStore(tmp_path / "m.db", ann=AnnSettings(threshold=0, build=False))
    for q in queries():
        got = frozen.vector_candidates("alice", q, 10)
        assert len(got) == 10
        assert dict(got).items() <= dict(exact.vector_candidates("alice", q, DISTINCT * PASSES)).items()
    state = frozen.ann.state(1)
    assert (state["generation"], state["nodes"], state["mapped"]) == (1, DISTINCT * PASSES, False)

    # One that builds replaces it with one node per distinct vector.
    fresh = SqliteStore(tmp_path / "m.db", ann=INLINE)
    fresh.vector_candidates("alice", BASE[0], 10)
    state = fresh.ann.state(1)
    assert (state["generation"], state["nodes"], state["mapped"]) == (2, DISTINCT, True)
    assert recall(fresh, exact, "alice", 10) == 1.0
    assert not (folder(store.path) / old).exists()


def test_an_index_saved_without_a_map_over_distinct_vectors_is_kept_and_extended(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    vectors = unit(np.random.default_rng(4), 3000)
    fill(store, "alice", 0, 3000, vectors)
    store.vector_candidates("alice", vectors[0], 10)
    store.close()
    write_one_node_per_key(store, 1, matrix_of(exact, "alice"))
    reopened = SqliteStore(tmp_path / "m.db", ann=INLINE)
    reopened.vector_candidates("alice", vectors[0], 10)
    assert reopened.ann.state(1)["generation"] == 1  # nothing repeats: used as it is
    # Extended with copies of its keys' vectors: they join those keys' nodes (a map is made).
    fill(reopened, "alice", 3000, 3000 + ann.TAIL_MAX + 10, np.resize(vectors, (ann.TAIL_MAX + 10, DIM)))
    reopened.vector_candidates("alice", vectors[0], 10)
    state = reopened.ann.state(1)
    assert (state["generation"], state["nodes"], state["mapped"]) == (2, 3000, True)
    assert state["keys"] == 3000 + ann.TAIL_MAX + 10
    assert recall(reopened, exact, "alice", 10) == 1.0
    assert len(reopened.vector_candidates("alice", vectors[7], 2)) == 2


def test_a_vector_repeated_hundreds_of_times(tmp_path: Path) -> None:
    """Twelve vectors, five hundred copies each: a node expands into far more keys than a search needs,
    and only the nearest nodes are scored."""
    store = SqliteStore(tmp_path / "m.db", ann=INLINE)
    exact = SqliteStore(tmp_path / "m.db", ann=EXACT)
    few = BASE[:12]
    fill(store, "alice", 0, 6000, few[np.arange(6000) % 12])
    for q in [*queries(), *few]:
        for k in (10, 50):
            assert tie_aware(store.vector_candidates("alice", q, k), exact.vector_candidates("alice", q, k)) == 1.0
            for key in SHARES:
                kept = Filters(annotations={key: "in"})
                want = exact.vector_candidates("alice", q, k, Scope(filters=kept))
                assert tie_aware(store.vector_candidates("alice", q, k, Scope(filters=kept)), want) == 1.0
    assert store.ann.state(1)["nodes"] == 12


def test_copies_are_exactly_equal_stored_vectors() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.integers(-127, 128, size=(6, 8)).astype(np.int8)
    vectors[3] = vectors[0]
    vectors[4] = vectors[0]
    vectors[5] = vectors[1]
    scales = np.ones(6, dtype=np.float32)
    scales[4] = 2.0  # the same int8 values at another scale: another vector
    matrix = UserMatrix(
        version=1, vectors=vectors, scales=scales, block_pks=np.arange(6), kinds=np.zeros(6, dtype=np.int8),
        event_ts=np.zeros(6), key_pks=np.arange(10, 16),
    )  # fmt: skip
    assert first_copies(matrix).tolist() == [0, 1, 2, 0, 4, 1]
    keys = KeyMap.of(np.array([10, 11, 12, 10, 14, 11]), np.arange(10, 16))
    assert sorted(keys.expand(np.array([11, 10, 99])).tolist()) == [10, 11, 13, 15]
    assert keys.label_of(np.array([13, 15, 99])).tolist() == [10, 11, -1]
    # The nearest nodes holding at least the budget of keys, whole: 11 (two keys), then 10 (two more).
    got, whole = keys.expand_nearest(np.array([11, 10, 12]), 3)
    assert sorted(got.tolist()) == [10, 11, 13, 15] and not whole
    got, whole = keys.expand_nearest(np.array([11, 10, 12]), 100)
    assert got.size == 5 and whole
