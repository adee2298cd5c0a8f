"""A PostgreSQL store has no file to keep its LLM call log beside: by default it is ``memlane.calls.db`` in the
folder the process runs in (where `memlane worker` writes it), and ``Memory.open`` on the URL cleans that one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from memlane.core.calls import default_call_log_path
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory

pytestmark = pytest.mark.postgres


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def chat(word: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"erin says {word}."}, {"role": "assistant", "content": "Noted."}]


def test_a_postgres_store_cleans_the_call_log_of_its_folder(
    schema_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_call_log_path(schema_url) == Path("memlane.calls.db")
    log = CallLog(tmp_path / "memlane.calls.db")  # what `memlane worker` run in this folder writes
    other = Memory.open(schema_url, embedder="hashing", llm=ScriptedLLM(reply, call_log=log), call_log=log)
    res = other.add("erin", chat("quasar"), extract="sync")
    other.add("erin", chat("nebula"), extract="sync")
    other.close()
    mem = Memory.open(schema_url, embedder="hashing")  # the default: memlane.calls.db here
    try:
        mem.delete("erin", res.block_ids[0])
        assert {r.block_id for r in log.list(10)}.isdisjoint({res.block_ids[0]}) and len(log.list(10)) == 3
        mem.delete_user("erin")
        assert log.list(10) == []
    finally:
        mem.close()
        log.close()
