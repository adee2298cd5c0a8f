"""``Memory.delete_blocks``: the blocks that pass filters, deleted in one transaction on every store (the
contract's params), as completely as one deleted block; the words and vectors left in no file are checked
by test_deleted_words_on_disk.py and test_deleted_vectors_on_disk.py."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, StoreError, ValidationError
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.sqlite import SqliteStore

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)


def facts(memory: Memory, user: str, session: str, texts: Sequence[str], **kw: Any) -> list[str]:
    return list(memory.add_facts(user, list(texts), session_id=session, time=T0, **kw).block_ids)


def live_ids(memory: Memory, user: str) -> set[str]:
    return {b.id for b in memory.browse(user, limit=1000).items}


def store_module_expiry(memory: Memory) -> ModuleType:
    """The module whose ``delete_blocks`` the store's ``delete_blocks`` deletes rows through (one per backend)."""
    module = sys.modules[type(memory.store).delete_blocks.__module__]
    assert callable(module.delete_blocks)
    return module


def test_the_session_s_listed_blocks_go_and_nothing_else(memory: Memory) -> None:
    s1 = facts(memory, "alice", "s1", ["Alice rows on Sunday.", "Alice bakes rye.", "Alice reads Tolstoy."])
    s2 = facts(memory, "alice", "s2", ["Alice fixed the bike."])
    bob = facts(memory, "bob", "s1", ["Bob rows on Sunday."])
    gone = memory.delete_blocks("alice", Filters(sessions=("s1",), block_ids=(s1[0], s1[2], s2[0], bob[0])))
    assert sorted(gone) == sorted([s1[0], s1[2]])  # another session's and another user's stay
    assert live_ids(memory, "alice") == {s1[1], s2[0]} and live_ids(memory, "bob") == {bob[0]}
    for block_id in gone:
        with pytest.raises(NotFoundError):
            memory.get("alice", block_id)
    for mode in ("vector", "keyword", "hybrid"):
        found = {h.block.id for h in memory.search("alice", "Alice rows on Sunday Tolstoy", k=10, mode=mode)}
        assert found.isdisjoint(gone), mode
    assert [h.block.id for h in memory.search("bob", "rows on Sunday", k=1)] == bob
    assert memory.store.integrity_check() == []  # the keyword statistics lost exactly the deleted keys


def test_annotations_and_kinds_select_what_goes(memory: Memory) -> None:
    work = facts(memory, "alice", "s1", ["The report is due Friday."], annotations={"topic": "work"})
    home = facts(memory, "alice", "s1", ["The boiler needs a service."], annotations={"topic": "home"})
    talk = memory.add_exchanges("alice", [("Any plans?", "A walk.")], session_id="s1", annotations={"topic": "work"})
    # annotations narrow the delete even when a search would apply them after its cut
    gone = memory.delete_blocks("alice", Filters(annotations={"topic": "work"}, annotations_after_cut=True))
    assert sorted(gone) == sorted([*work, *talk.block_ids])
    assert live_ids(memory, "alice") == set(home)


def test_no_rule_deletes_every_block_and_keeps_the_user(memory: Memory) -> None:
    facts(memory, "alice", "s1", ["One.", "Two."])
    facts(memory, "alice", "s2", ["Three."], extract="async")  # with a queued extraction job
    assert len(memory.delete_blocks("alice", Filters())) == 3
    counts = memory.store.user_row_counts("alice")
    assert {k: v for k, v in counts.items() if k in ("blocks", "search_keys", "key_vectors", "jobs")} == {
        "blocks": 0,
        "search_keys": 0,
        "key_vectors": 0,
        "jobs": 0,
    }
    assert memory.get_user("alice").blocks == 0 and memory.get_session("alice", "s2").session_id == "s2"
    assert memory.delete_blocks("nobody", Filters()) == []  # an unknown user has none


def test_expired_blocks_that_pass_go_too(memory: Memory) -> None:
    old = facts(memory, "alice", "s1", ["A note with a short life."], ttl_s=1)
    kept = facts(memory, "alice", "s2", ["A note for good."])
    time.sleep(1.1)
    assert live_ids(memory, "alice") == set(kept)  # hidden from every read, not yet swept
    assert memory.delete_blocks("alice", Filters(sessions=("s1",))) == old
    assert memory.store.user_row_counts("alice")["blocks"] == 1


def test_one_transaction_for_every_block(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's delete path runs once for all the blocks; a failure in it leaves every block in place."""
    ids = facts(memory, "alice", "s1", [f"Note {i} about the garden." for i in range(5)])
    expiry = store_module_expiry(memory)
    real = expiry.delete_blocks
    calls: list[int] = []

    def fails_after_deleting(conn: Any, user_id: int, pks: Sequence[int]) -> int:
        calls.append(len(pks))
        real(conn, user_id, pks)
        raise StoreError("the disk went away")

    monkeypatch.setattr(expiry, "delete_blocks", fails_after_deleting)
    with pytest.raises(StoreError):
        memory.delete_blocks("alice", Filters(sessions=("s1",)))
    assert calls == [5]
    assert live_ids(memory, "alice") == set(ids)  # rolled back, all of it
    assert {h.block.id for h in memory.search("alice", "garden", k=10, mode="keyword")} == set(ids)
    monkeypatch.setattr(expiry, "delete_blocks", real)
    assert sorted(memory.delete_blocks("alice", Filters(sessions=("s1",)))) == sorted(ids)


def test_bad_filters_delete_nothing(memory: Memory) -> None:
    ids = facts(memory, "alice", "s1", ["Keep me."])
    with pytest.raises(ValidationError) as err:
        memory.delete_blocks("alice", None)  # type: ignore[arg-type]
    assert err.value.where == "filters"
    with pytest.raises(ValidationError) as err:
        memory.delete_blocks("alice", Filters(prompt_version=2))
    assert err.value.where == "filters.prompt_version"
    assert live_ids(memory, "alice") == set(ids)


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def test_their_llm_calls_go_with_them(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "m.db.calls.db")
    mem = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder(), llm=ScriptedLLM(reply, call_log=log), call_log=log)
    try:
        gone = facts(mem, "erin", "s1", ["Erin's quasar is red.", "Erin's nebula is blue."], extract="sync")
        kept = facts(mem, "erin", "s2", ["Erin's pulsar is green."], extract="sync")
        assert {r.block_id for r in log.list(100)} == {*gone, *kept}
        assert sorted(mem.delete_blocks("erin", Filters(sessions=("s1",)))) == sorted(gone)
        assert {r.block_id for r in log.list(100)} == set(kept)
    finally:
        mem.close()
        log.close()
