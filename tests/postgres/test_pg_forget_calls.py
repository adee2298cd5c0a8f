"""A PostgreSQL store keeps its LLM call log in its own ``llm_calls`` table: a worker run in one folder and a
delete run from another reach the same log, and ``delete_user`` removes the user's calls in its own
transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.core.calls import default_call_log_path, own_call_log
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.postgres.calllog import StoreCallLog
from memlane.core.store.postgres.store import PostgresStore
from memlane.interfaces.cli.app import cli, register_all

pytestmark = pytest.mark.postgres
register_all()


def reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0]
    return json.dumps({"summary": f"Summary: {first}", "facts": [f"Fact: {first}"]})


def chat(word: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"erin says {word}."}, {"role": "assistant", "content": "Noted."}]


def calls_holding(store: PostgresStore, word: str) -> int:
    return int(store.query("SELECT count(*) FROM llm_calls WHERE request LIKE %s", (f"%{word}%",))[0][0])


def test_a_delete_from_another_folder_reaches_the_workers_calls(
    schema_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memlane add --extract sync` in one folder (the LLM logs its calls), `memlane delete-user` in another:
    nothing of the user's words is left in the call log, wherever it is."""
    env = {"MEMLANE_STORE": schema_url, "MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "scripted"}
    runner = CliRunner()
    (tmp_path / "worker").mkdir()
    (tmp_path / "admin").mkdir()
    monkeypatch.chdir(tmp_path / "worker")
    res = runner.invoke(cli, ["add", "erin", "--extract", "sync"], input=json.dumps(chat("quasar")), env=env)
    assert res.exit_code == 0, res.output
    assert default_call_log_path(schema_url) is None
    store = PostgresStore(schema_url, create=False)
    try:
        assert calls_holding(store, "quasar") >= 1
        monkeypatch.chdir(tmp_path / "admin")
        res = runner.invoke(cli, ["delete-user", "erin"], env=env)
        assert res.exit_code == 0, res.output
        assert calls_holding(store, "quasar") == 0
    finally:
        store.close()
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and b"quasar" in p.read_bytes()]
    assert leftovers == []


def test_the_store_keeps_the_calls_and_deletes_forget_them(new_store: Callable[..., PostgresStore]) -> None:
    store = new_store()
    log = own_call_log(store)
    assert isinstance(log, StoreCallLog)
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(reply, call_log=log))
    try:
        first = mem.add("erin", chat("quasar"), extract="sync")
        mem.add("erin", chat("nebula"), extract="sync")
        mem.add("finn", chat("pulsar"), extract="sync")
        assert {r.namespace for r in log.list(10)} == {"erin", "finn"} and log.stats().calls == len(log.list(100))
        quasar = calls_holding(store, "quasar")
        mem.delete("erin", first.block_ids[0])  # one of the block's perspectives: its own calls go
        assert calls_holding(store, "quasar") == quasar - 1 and calls_holding(store, "nebula") >= 1
        for block_id in first.block_ids[1:]:
            mem.delete("erin", block_id)
        assert calls_holding(store, "quasar") == 0 and store.user_row_counts("erin")["llm_calls"] >= 1
        store.delete_user("erin")  # the store alone, no call log handed to it: its own transaction
        assert store.user_row_counts("erin")["llm_calls"] == 0 and calls_holding(store, "nebula") == 0
        assert {r.namespace for r in log.list(10)} == {"finn"}
        cached = log.lookup(log.list(1)[0].cache_key)
        assert cached is not None and cached.namespace == "finn"
    finally:
        mem.close()
