"""The SQLite store's migration of a store written before the memory model: one session per session id."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_downgrade import downgrade_to_v10
from store_samples import chat

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import SessionEndedError
from memlane.core.memory import Memory
from memlane.core.model import BlockKind
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.sqlite.schema import MIGRATIONS

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


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
