"""Sessions of the memory model on every backend (docs/design/007-memory-model.md): created, listed,
updated, ended (refusing writes then) and deleted leaving nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_samples import chat, reply

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import (
    AlreadyExistsError,
    NotFoundError,
    SessionEndedError,
)
from memlane.core.llm import CallLog, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.core.store.sqlite import SqliteStore

StoreFactory = Callable[[], Store]


T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def test_sessions_are_created_listed_updated_and_ended(mem: Memory) -> None:
    with pytest.raises(NotFoundError):
        mem.create_session("alice", "s1")  # an unknown user is not created here
    mem.create_user("alice")
    s1 = mem.create_session("alice", "s1", started_at=T0, annotations={"topic": "food"}, metadata={"n": 1})
    assert (s1.started_at, s1.ended, s1.annotations, s1.metadata, s1.blocks) == (
        T0,
        False,
        {"topic": "food"},
        {"n": 1},
        0,
    )
    with pytest.raises(AlreadyExistsError):
        mem.create_session("alice", "s1")
    assert mem.create_session("alice", "s1", exist_ok=True, annotations={"other": "x"}).annotations == {"topic": "food"}
    mem.create_session("alice", "s2", started_at=T0 + timedelta(days=1))
    mem.add("alice", chat("hello there", "hi"), session_id="s3", time=T0 + timedelta(days=2))  # made by the add
    page = mem.list_sessions("alice", limit=2)
    assert page.total == 3 and [s.session_id for s in page.items] == ["s3", "s2"]  # newest started first
    assert mem.get_session("alice", "s3").blocks == 2 and mem.get_user("alice").sessions == 3
    updated = mem.update_session("alice", "s1", metadata={"n": 2}, default_ttl_s=3600)
    assert updated.annotations == {"topic": "food"} and updated.metadata == {"n": 2} and updated.default_ttl_s == 3600
    ended = mem.end_session("alice", "s3", at=T0 + timedelta(days=3))
    assert ended.ended and ended.ended_at == T0 + timedelta(days=3)
    with pytest.raises(SessionEndedError) as twice:
        mem.end_session("alice", "s3")
    assert twice.value.code == "SESSION_ALREADY_ENDED"
    with pytest.raises(SessionEndedError):
        mem.update_session("alice", "s3", metadata={})
    with pytest.raises(NotFoundError):
        mem.get_session("alice", "nope")
    with pytest.raises(NotFoundError):
        mem.get_session("bob", "s1")


def test_an_ended_session_keeps_its_blocks_and_refuses_writes(mem: Memory) -> None:
    res = mem.add_facts("alice", ["Alice keeps bees"], session_id="hive")
    mem.end_session("alice", "hive")
    before = mem.count("alice")
    for write in (
        lambda: mem.add("alice", chat("more bees", "ok"), session_id="hive"),
        lambda: mem.add_facts("alice", ["Alice sells honey"], session_id="hive"),
        lambda: mem.add_exchanges("alice", [("a", "b")], session_id="hive"),
        lambda: mem.update("alice", res.block_ids[0], content="Alice keeps wasps"),
    ):
        with pytest.raises(SessionEndedError):
            write()
    assert mem.count("alice") == before
    assert mem.get("alice", res.block_ids[0]).message == "Alice keeps bees"
    for mode in ("vector", "keyword", "hybrid"):
        assert [h.block.id for h in mem.search("alice", "bees", k=1, mode=mode)] == [res.block_ids[0]]


def test_delete_session_leaves_nothing_in_any_table(store_factory: StoreFactory, tmp_path: Path) -> None:
    """Deleting a session equals a store that never had it: the same rows in every table of the user, its
    texts' cached vectors and LLM calls gone, other sessions untouched."""
    log = CallLog(tmp_path / "calls.db")
    swept = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(reply, call_log=log), call_log=log)
    fresh = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(reply))
    if not hasattr(swept.store, "create_session"):
        pytest.skip("this store does not implement the memory model yet")
    try:
        for m in (swept, fresh):
            m.add("alice", chat("alice likes tea", "noted"), session_id="keep", extract="sync")
            m.add_facts("alice", ["alice owns a cat"], session_id="keep", extract="async")
            m.add("bob", chat("bob likes tea", "noted"), session_id="gone", extract="sync")
        swept.add("alice", chat("secret plan alpha", "noted"), session_id="gone", extract="sync")
        swept.add_facts("alice", ["secret fact beta"], session_id="gone", extract="async")
        swept.add("alice", chat("secret plan gamma", "noted"), session_id="gone", extract="sync")
        assert any("secret" in repr(r) for r in log.list(1000))
        assert swept.delete_session("alice", "gone") == 5  # two dual exchanges (two blocks each) and a fact
        counts, expected = swept.store.user_row_counts("alice"), fresh.store.user_row_counts("alice")
        counts.pop("key_segments", None), expected.pop("key_segments", None)
        assert counts == expected
        assert swept.store.integrity_check() == []
        assert [s.session_id for s in swept.list_sessions("alice").items] == ["keep"]
        assert swept.get_session("bob", "gone").blocks == 2  # another user's session of the same id stays
        assert swept.store.get_vectors(swept.embedder.model_id, [b for b in _hashes("secret plan gamma")]) == {}
        assert log.list(1000) and all("secret" not in repr(r) for r in log.list(1000))
        if isinstance(swept.store, SqliteStore):  # no cell of any table holds a word of the deleted session
            tables = [r[0] for r in swept.store.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for row in swept.store.query(f'SELECT * FROM "{table}"'):
                    cells = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in row]
                    assert not any("secret" in c for c in cells), table
        for mode in ("vector", "keyword", "hybrid"):
            assert all("secret" not in h.block.message for h in swept.search("alice", "secret plan", k=5, mode=mode))
        with pytest.raises(NotFoundError):
            swept.delete_session("alice", "gone")
    finally:
        swept.close()
        fresh.close()
        log.close()


def _hashes(user_line: str) -> list[str]:
    from memlane.core.model import content_hash

    return [content_hash(f"user: {user_line}\nassistant: noted")]
