"""After a user's or a block's deletion and after a retention sweep, the deleted words are in no file beside the
store, while it is still open: not in the store, nor in the LLM call log, nor in either's write-ahead log
(a kill -9 or a file backup right after the delete would keep the log as it is)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.retention import RetentionPolicy
from memlane.core.store.sqlite import SqliteStore

MARKER = "quokkazanzibar"  # a word only the deleted exchanges hold


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted, thanks."}]


def files_holding(folder: Path, needle: str) -> list[str]:
    """Every file in ``folder`` whose bytes hold ``needle`` (the store, the call log, their -wal and -shm)."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and needle.encode() in p.read_bytes())


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    log = CallLog(tmp_path / "m.db.calls.db")
    mem = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder(), llm=ScriptedLLM(reply, call_log=log), call_log=log)
    mem.add("fay", chat("Fay keeps bees in the garden."), extract="sync")
    yield mem
    mem.close()
    log.close()


def test_a_deleted_user_is_in_no_file_and_no_write_ahead_log(memory: Memory, tmp_path: Path) -> None:
    memory.add("erin", chat(f"My {MARKER} plays the oboe."), extract="sync")
    assert "m.db-wal" in files_holding(tmp_path, MARKER)  # the check sees the words where they are
    memory.delete_user("erin")
    assert files_holding(tmp_path, MARKER) == []
    assert "bees" in " ".join(r.request for r in memory._call_logs()[0].list(10))  # the rest is kept


def test_a_deleted_block_is_in_no_file(memory: Memory, tmp_path: Path) -> None:
    res = memory.add("erin", chat(f"My {MARKER} plays the oboe."), extract="sync", perspective="single")
    memory.add("erin", chat("Erin drinks tea."), extract="sync")
    memory.delete("erin", res.block_ids[0])
    assert files_holding(tmp_path, MARKER) == []


def test_blocks_deleted_by_filters_are_in_no_file(memory: Memory, tmp_path: Path) -> None:
    memory.add("erin", chat(f"My {MARKER} plays the oboe."), extract="sync", session_id="music")
    memory.add("erin", chat(f"The {MARKER} also sings."), extract="sync", session_id="music")
    memory.add("erin", chat("Erin drinks tea."), extract="sync")
    assert len(memory.delete_blocks("erin", Filters(sessions=("music",)))) == 4
    assert files_holding(tmp_path, MARKER) == []


def test_an_expired_block_is_in_no_file_after_the_sweep(memory: Memory, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    memory.add("erin", chat(f"My {MARKER} plays the oboe."), extract="sync", time=now - timedelta(days=40))
    memory.add("erin", chat("Erin drinks tea."), extract="sync", time=now)
    memory.set_retention(None, RetentionPolicy(max_age_days=30))
    assert memory.apply_retention().expired == 2
    assert files_holding(tmp_path, MARKER) == []


def test_the_write_ahead_logs_are_bounded(memory: Memory, tmp_path: Path) -> None:
    assert isinstance(memory.store, SqliteStore)
    assert memory.store.query("PRAGMA journal_size_limit")[0][0] > 0
    with sqlite3.connect(tmp_path / "m.db.calls.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    log = memory._call_logs()[0]
    assert log._db.execute("PRAGMA journal_size_limit").fetchone()[0] > 0
    assert log._db.execute("PRAGMA secure_delete").fetchone()[0] == 1


# -- updates in place: what an update replaces is in no file either ----------------------------------------


def test_an_updated_facts_old_text_is_in_no_file(memory: Memory, tmp_path: Path) -> None:
    fact = memory.add_facts("erin", [f"Erin's {MARKER} code is 4711."], extract="sync").block_ids[0]
    memory.add_facts("erin", ["Erin drinks tea."], extract="sync")
    assert "m.db-wal" in files_holding(tmp_path, MARKER)
    memory.update("erin", fact, content="Erin has no code.")
    assert files_holding(tmp_path, MARKER) == []
    assert memory.get("erin", fact).message == "Erin has no code."


def test_an_updated_exchanges_old_side_and_annotation_are_in_no_file(memory: Memory, tmp_path: Path) -> None:
    res = memory.add_exchanges("erin", [(f"My {MARKER} is called Ziggy.", "Nice name.")], annotations={"pet": MARKER})
    block = res.block_ids[0]
    memory.update("erin", block, sides=("My cat is called Ziggy.", "Nice name."), annotations={"pet": "cat"})
    assert files_holding(tmp_path, MARKER) == []
    old = memory.add_facts("erin", [f"Erin's {MARKER} sleeps all day."]).block_ids[0]
    memory.update("erin", old, annotations={"secret": "none"})  # the text stays: only the labels change
    assert files_holding(tmp_path, MARKER) == ["m.db"]


KILLED_AFTER_UPDATE = """
import sys
from memlane.core.memory import Memory
from memlane.core.model import Filters
mem = Memory.open(sys.argv[1], embedder="hashing")
block = mem.add_facts("erin", [sys.argv[2]]).block_ids[0]
mem.add_facts("erin", ["Erin drinks tea."])
mem.update("erin", block, content="Erin has no code.")
print("updated", flush=True)
sys.stdin.read()  # killed here, the update acknowledged
"""


def test_an_update_acknowledged_before_a_kill_9_left_the_old_text_in_no_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    store = tmp_path / "killed.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_AFTER_UPDATE, str(store), f"Erin's {MARKER} code is 4711."],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "updated"
        assert files_holding(tmp_path, MARKER) == []  # as the process left the files when it said so
    finally:
        proc.kill()
        proc.wait(timeout=20)
    assert files_holding(tmp_path, MARKER) == []
    mem = Memory.open(store, embedder="hashing")  # and a restart finds the update
    try:
        assert [b.message for b in mem.list("erin")] == ["Erin has no code.", "Erin drinks tea."]
    finally:
        mem.close()
    assert files_holding(tmp_path, MARKER) == []
