"""The memory model's SQLite-specific parts: the migration of a store written before it, and updates and
filters through the approximate vector index."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_downgrade import downgrade_to_v10

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import SessionEndedError
from memlane.core.memory import Memory
from memlane.core.model import BlockKind, Filters
from memlane.core.store.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.sqlite.schema import MIGRATIONS

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
INLINE = AnnSettings(threshold=0, background=False, ef_search=64)


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def test_a_store_of_the_previous_release_migrates_to_one_session_per_session_id(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    mem = Memory(SqliteStore(path), HashingEmbedder())
    mem.add("alice", chat("morning run", "great"), session_id="s1", time=T0 + timedelta(days=1))
    mem.add("alice", chat("evening swim", "nice"), session_id="s1", time=T0)
    mem.add("alice", chat("a book", "which?"), conversation_id="c2", session_id="s2", time=T0 + timedelta(days=5))
    mem.add("bob", chat("hello", "hi"), session_id="s1", time=T0 + timedelta(days=9))
    mem.close()
    downgrade_to_v10(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 10
        assert raw.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sessions'").fetchone() == (0,)
    mem = Memory(SqliteStore(path), HashingEmbedder())
    try:
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        sessions = mem.list_sessions("alice")
        assert [(s.session_id, s.conversation_id, s.started_at, s.blocks) for s in sessions.items] == [
            ("s2", "c2", T0 + timedelta(days=5), 2),
            ("s1", "default", T0, 4),
        ]
        assert not any(s.ended for s in sessions.items) and sessions.total == 2
        assert [s.session_id for s in mem.list_sessions("bob").items] == ["s1"]
        block = mem.list("alice")[0]
        assert (block.kind, block.sides, block.ttl_s, block.expires_at, block.status) == (
            BlockKind.EXCHANGE, (), None, None, "ready",
        )  # fmt: skip
        info = mem.get_user("alice")
        assert (info.display_name, info.metadata, info.sessions, info.blocks) == (None, {}, 2, 6)
        # The migrated sessions behave as any other.
        mem.add("alice", chat("more running", "ok"), session_id="s1")
        mem.end_session("alice", "s1")
        with pytest.raises(SessionEndedError):
            mem.add("alice", chat("even more", "ok"), session_id="s1")
        assert mem.store.integrity_check() == []
    finally:
        mem.close()


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
