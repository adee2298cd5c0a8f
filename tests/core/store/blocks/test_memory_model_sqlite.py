"""The memory model's SQLite-specific parts for blocks: updates through the approximate vector index and the
key segments."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


INLINE = AnnSettings(threshold=0, background=False, ef_search=64)


def test_an_update_leaves_nothing_of_the_old_text_with_the_ann_index_on(tmp_path: Path) -> None:
    """With every user searched through the approximate index (threshold 0), an update replaces the
    block's ANN entry: the old text is found by no search mode, before and after the index is rebuilt."""
    mem = Memory(SqliteStore(tmp_path / "ann.db", ann=INLINE), HashingEmbedder())
    try:
        ids = [
            mem.add_facts("alice", [f"filler note number {i} about weather and tea"]).block_ids[0] for i in range(40)
        ]
        target = mem.add_facts("alice", ["zebra xylophone quartz jubilee"]).block_ids[0]
        mem.store.build_index("alice")
        status = mem.store.index_status("alice")[0]
        assert status.keys == 41
        assert [h.block.id for h in mem.search("alice", "zebra xylophone quartz jubilee", k=1, mode="vector")] == [
            target
        ]
        mem.update("alice", target, content="kettle lantern meadow")
        for rebuilt in (False, True):
            if rebuilt:
                mem.store.build_index("alice")
            for mode in ("vector", "keyword", "hybrid"):
                hits = mem.search("alice", "zebra xylophone quartz jubilee", k=10, mode=mode)
                assert all("zebra" not in h.block.message for h in hits), (mode, rebuilt)
                mine = [h for h in hits if h.block.id == target]
                if mode == "vector" and mine:
                    assert mine[0].score < 0.5  # it scores as its new text, not the old one (1.0)
                if mode == "keyword":
                    assert hits == []
            new = mem.search("alice", "kettle lantern meadow", k=1, mode="vector")
            assert [h.block.id for h in new] == [target] and new[0].score > 0.99
        # Filters go through the index too (a wide pool) or around it (a narrow one), exactly.
        wide = Filters(block_ids=tuple(ids[:30]))
        assert {h.block.id for h in mem.search("alice", "weather tea", k=30, mode="vector", filters=wide)} == set(
            ids[:30]
        )
        narrow = Filters(block_ids=(ids[3], target))
        assert {h.block.id for h in mem.search("alice", "weather", k=5, mode="vector", filters=narrow)} == {
            ids[3],
            target,
        }
    finally:
        mem.close()


def test_updates_retire_keys_that_count_nowhere_and_leave_with_their_segments(tmp_path: Path) -> None:
    """An update retires its block's old keys (dead_keys) rather than rewriting the segment holding them:
    the store then searches and counts exactly as one that was written with the new texts, the integrity
    check agrees, and the retired rows leave at the next rewrite, or with their block or user."""
    import random

    rng = random.Random(3)
    words = [
        "amber",
        "basil",
        "cedar",
        "delta",
        "ember",
        "fjord",
        "grove",
        "harbor",
        "iris",
        "juniper",
        "kelp",
        "lumen",
    ]
    texts = [" ".join(rng.choice(words) for _ in range(6)) for _ in range(300)]
    final = list(texts)
    updated = Memory(SqliteStore(tmp_path / "updated.db"), HashingEmbedder())
    fresh = Memory(SqliteStore(tmp_path / "fresh.db"), HashingEmbedder())
    try:
        ids = list(updated.add_facts("alice", texts, time=T0).block_ids)
        for i in rng.sample(range(300), 40):
            final[i] = " ".join(rng.choice(words) for _ in range(4)) + f" revised{i}"
            updated.update("alice", ids[i], content=final[i])
        fresh.add_facts("alice", final, time=T0)
        store = updated.store
        assert isinstance(store, SqliteStore)
        assert store.query("SELECT count(*) FROM dead_keys")[0][0] == 40
        assert store.integrity_check() == []
        for query in ("amber basil", "revised7 kelp", "fjord lumen harbor"):
            for mode in ("keyword", "vector"):
                a = [(h.block.message, round(h.score, 6)) for h in updated.search("alice", query, k=8, mode=mode)]
                b = [(h.block.message, round(h.score, 6)) for h in fresh.search("alice", query, k=8, mode=mode)]
                assert a == b, (query, mode)
        # A deletion rewrites the segment holding the deleted key: its retired keys go with that rewrite.
        kept = next(i for i in range(300) if final[i] == texts[i])
        updated.delete("alice", ids[kept])
        assert store.query("SELECT count(*) FROM dead_keys")[0][0] == 0 and store.integrity_check() == []
        assert updated.count("alice") == 299
        again = updated.update("alice", ids[kept - 1 if kept else kept + 1], content="amber once more")
        assert store.query("SELECT count(*) FROM dead_keys")[0][0] == 1 and again.message == "amber once more"
        updated.delete_session("alice", "default")
        assert store.query("SELECT count(*) FROM dead_keys")[0][0] == 0
        updated.add_facts("alice", ["one more"])
        updated.update("alice", updated.list("alice")[0].id, content="one more, changed")
        updated.delete_user("alice")
        assert store.query("SELECT count(*) FROM dead_keys")[0][0] == 0
        assert store.query("SELECT count(*) FROM key_segments")[0][0] == 0
        assert store.integrity_check() == []
    finally:
        updated.close()
        fresh.close()
