"""After every way a block's text can go (a deletion of the block, of several, of its session, of its user, a
retention or TTL sweep, an update in place), the text's vector is in no file beside the SQLite store: not
in the approximate index's files (hnswlib keeps the vectors of nodes it marks deleted), nor in the store
and its write-ahead log. The files are read as they are on disk, every float32 and int8 run in them
compared with the text's embedding, without asking hnswlib. Also across saves that race the deletions,
a kill -9 right after one returns, and a process killed between its commit and the scrub.

The companion of test_deleted_words_on_disk.py (the words); here, the vectors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from vector_scan import DIM, files_with_vector

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.retention import RetentionPolicy
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore, ann, annscrub
from memlane.core.store.sqlite.ann import folder

INLINE = AnnSettings(threshold=0, background=False)  # every user indexed, built by the first search
SECRET = "The vault code is seven four one one, behind the painting."
OTHERS = [f"Note {i}: the {w} is on shelf {i % 7}." for i, w in enumerate(["tea", "map", "key", "lamp"] * 60)]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    mem = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(DIM), ann=INLINE)
    yield mem
    mem.close()


def indexed(mem: Memory, user: str, texts: list[str], **kw: object) -> list[str]:
    """Add ``texts`` as facts of ``user``, then search once: the user's index is built and saved with them."""
    ids = mem.add_facts(user, texts, **kw).block_ids  # type: ignore[arg-type]
    mem.search(user, "shelf", mode="vector")
    assert list(folder(Path(str(mem.store.path))).glob("u*.hnsw")), "no index file was saved"  # type: ignore[attr-defined]
    return list(ids)


def test_the_scan_sees_the_vector_where_it_is(memory: Memory, tmp_path: Path) -> None:
    indexed(memory, "erin", [SECRET, *OTHERS])
    held = files_with_vector(tmp_path, SECRET)
    assert any(name.endswith(".hnsw") for name in held), held
    assert "m.db" in held or "m.db-wal" in held  # the store's quantized copy, and the embedding cache


def test_a_deleted_block(memory: Memory, tmp_path: Path) -> None:
    secret, *_ = indexed(memory, "erin", [SECRET, *OTHERS])
    memory.delete("erin", secret)
    assert files_with_vector(tmp_path, SECRET) == []
    assert [h.block.message for h in memory.search("erin", OTHERS[3], k=1, mode="vector")] == [OTHERS[3]]


def test_several_deleted_blocks(memory: Memory, tmp_path: Path) -> None:
    ids = indexed(memory, "erin", [SECRET, "Second secret: the safe opens with nine nine two.", *OTHERS])
    for block_id in ids[:2]:  # what the Agent Memory API's deletion of listed blocks does
        memory.delete("erin", block_id)
    assert files_with_vector(tmp_path, SECRET) == []
    assert files_with_vector(tmp_path, "Second secret: the safe opens with nine nine two.") == []


def test_blocks_deleted_by_filters_in_one_call(memory: Memory, tmp_path: Path) -> None:
    second = "Second secret: the safe opens with nine nine two."
    ids = indexed(memory, "erin", [SECRET, second, *OTHERS])
    assert memory.delete_blocks("erin", Filters(block_ids=tuple(ids[:2]))) == ids[:2]
    assert files_with_vector(tmp_path, SECRET) == []
    assert files_with_vector(tmp_path, second) == []
    assert [h.block.message for h in memory.search("erin", OTHERS[3], k=1, mode="vector")] == [OTHERS[3]]


def test_a_deleted_session(memory: Memory, tmp_path: Path) -> None:
    indexed(memory, "erin", OTHERS)
    memory.add_facts("erin", [SECRET], session_id="private")
    memory.search("erin", "shelf", mode="vector")  # the index's tail: not yet in the file
    memory.store.build_index("erin")  # now it is
    assert any(n.endswith(".hnsw") for n in files_with_vector(tmp_path, SECRET))
    memory.delete_session("erin", "private")
    assert files_with_vector(tmp_path, SECRET) == []


def test_a_deleted_user(memory: Memory, tmp_path: Path) -> None:
    indexed(memory, "erin", [SECRET, *OTHERS])
    indexed(memory, "fay", OTHERS)
    memory.delete_user("erin")
    assert files_with_vector(tmp_path, SECRET) == []


def test_a_retention_sweep(memory: Memory, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    memory.add_facts("erin", [SECRET], time=now - timedelta(days=40))
    indexed(memory, "erin", OTHERS, time=now)
    memory.set_retention(None, RetentionPolicy(max_age_days=30))
    assert memory.apply_retention().expired == 1
    assert files_with_vector(tmp_path, SECRET) == []


def test_a_ttl_sweep(memory: Memory, tmp_path: Path) -> None:
    memory.add_facts("erin", [SECRET], ttl_s=1)
    indexed(memory, "erin", OTHERS)
    assert memory.apply_retention(now=datetime.now(UTC) + timedelta(seconds=5)).expired == 1
    assert files_with_vector(tmp_path, SECRET) == []


def test_an_update_in_place(memory: Memory, tmp_path: Path) -> None:
    secret, *_ = indexed(memory, "erin", [SECRET, *OTHERS])
    memory.update("erin", secret, content="There is no vault.")
    # Neither in the index files nor in the store: the retired key's int8 vector was overwritten too.
    assert files_with_vector(tmp_path, SECRET) == []
    assert memory.get("erin", secret).message == "There is no vault."


def test_a_vector_another_block_still_holds_stays(memory: Memory, tmp_path: Path) -> None:
    """Two blocks of the same text share one node of the graph: deleting one keeps the node's vector,
    which is the other's, and the index still finds the other."""
    first, second, *_ = indexed(memory, "erin", [SECRET, SECRET, *OTHERS])
    memory.delete("erin", first)
    assert any(n.endswith(".hnsw") for n in files_with_vector(tmp_path, SECRET))
    assert [h.block.id for h in memory.search("erin", SECRET, k=1, mode="vector")] == [second]
    memory.delete("erin", second)
    assert files_with_vector(tmp_path, SECRET) == []


def test_an_index_saved_without_its_labels_and_a_dead_writers_temporary_file(memory: Memory, tmp_path: Path) -> None:
    """An index saved by an earlier memlane has no labels file: the scrub reads the labels from the
    records. A temporary file left by a writer that died is deleted; one being written is left alone."""
    secret, *_ = indexed(memory, "erin", [SECRET, *OTHERS])
    (index,) = folder(tmp_path / "m.db").glob("u1-*.hnsw")
    annscrub.labels_path(index).unlink()
    leftover = index.with_name("u1-000000000000.hnsw.tmp")
    leftover.write_bytes(index.read_bytes())
    being_written = index.with_name("u1-111111111111.hnsw.tmp")
    with annscrub.writing(being_written):
        memory.delete("erin", secret)
        assert being_written.exists() and not leftover.exists()
    assert files_with_vector(tmp_path, SECRET) == []


def test_a_save_from_an_index_loaded_before_the_deletion(tmp_path: Path) -> None:
    """A process that loaded the index before another deleted a block still holds the block's vector in
    memory; when it extends the index and saves it, the new file must not bring the vector back."""
    first = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(DIM), ann=INLINE)
    second = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(DIM), ann=INLINE)
    try:
        secret, *_ = indexed(first, "erin", [SECRET, *OTHERS])
        second.delete("erin", secret)
        assert files_with_vector(tmp_path, SECRET) == []
        first.add_facts("erin", ["A new note past the index's watermark."])
        first.store.build_index("erin")  # extends first's graph, loaded before the deletion, and saves it
        assert first.store.ann.state(1)["generation"] == 2  # type: ignore[attr-defined]
        assert files_with_vector(tmp_path, SECRET) == []
    finally:
        first.close()
        second.close()


def test_a_deletion_while_a_save_is_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deletion that commits after a save read which keys are live, and looks for the user's files
    before the new one is in place: the save scrubs the new file when it records it."""
    saver = SqliteStore(tmp_path / "m.db", ann=INLINE)
    first = Memory(saver, HashingEmbedder(DIM))
    deleter = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(DIM), ann=INLINE)
    try:
        secret, *_ = indexed(first, "erin", [SECRET, *OTHERS])
        first.add_facts("erin", ["A new note past the index's watermark."])
        live = ann.AnnIndexes._live
        calls: list[int] = []

        def live_then_delete(*args: object, **kwargs: object) -> object:
            got = live(*args, **kwargs)  # type: ignore[arg-type]
            if not calls:
                calls.append(1)
                deleter.delete("erin", secret)  # scrubs the files it finds: the old one only
            return got

        monkeypatch.setattr(ann.AnnIndexes, "_live", staticmethod(live_then_delete))
        saver.build_index("erin")
        assert calls and saver.ann.state(1)["generation"] == 2
        assert files_with_vector(tmp_path, SECRET) == []
    finally:
        first.close()
        deleter.close()


KILLED = """
import os, sys
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import annscrub
mem = Memory.open(sys.argv[1], embedder=HashingEmbedder({dim}), ann=AnnSettings(threshold=0, background=False))
block = mem.add_facts("erin", [sys.argv[2]]).block_ids[0]
mem.add_facts("erin", [f"Note {{i}}: the tea is on shelf {{i}}." for i in range(200)])
mem.search("erin", "shelf", mode="vector")
if sys.argv[3] == "between":  # dies as a kill -9 would, after the deletion's commit, before the scrub
    annscrub.scrub_journal = lambda *a, **k: os._exit(9)
mem.delete("erin", block)
print("deleted", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("when", ["after", "between"])
def test_a_process_killed_after_a_deletion(tmp_path: Path, when: str) -> None:
    store = tmp_path / "killed.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED.format(dim=DIM), str(store), SECRET, when],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    if when == "after":  # acknowledged: nothing left, before and after the restart
        assert line == "deleted"
        assert files_with_vector(tmp_path, SECRET) == []
    else:  # never acknowledged, but committed: the index file still holds it, until the store is opened
        assert line == "" and proc.returncode == 9
        assert any(n.endswith(".hnsw") for n in files_with_vector(tmp_path, SECRET))
    mem = Memory.open(store, embedder=HashingEmbedder(DIM), ann=INLINE)
    try:
        assert files_with_vector(tmp_path, SECRET) == []
        assert len(mem.list("erin", limit=1000)) == 200
    finally:
        mem.close()
