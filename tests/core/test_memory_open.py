"""Memory.open takes what the edge configured (LLM, call log, embedder settings) as arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.protocol import Embedder, EmbedderConfig, make_embedder, register_embedder
from memlane.core.errors import ConfigError, StoreNotFoundError
from memlane.core.llm import CallLog, make_llm
from memlane.core.memory import Memory

TURN = [{"role": "user", "content": "I moved to Ghent."}, {"role": "assistant", "content": "Nice city!"}]


def test_the_llm_and_call_log_are_arguments_of_open(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.db")
    mem = Memory.open(tmp_path / "m.db", embedder="hashing", llm=make_llm("scripted", call_log=log), call_log=log)
    try:
        assert mem.llm is not None and mem.call_log is log
        res = mem.add("alice", TURN, extract="sync")
        assert res.block_ids and all(b.summary for b in mem.list("alice"))
    finally:
        mem.close()
        log.close()


def test_the_old_call_forms_still_work(tmp_path: Path) -> None:
    mem = Memory.open(str(tmp_path / "m.db"), embedder=HashingEmbedder())
    try:
        assert mem.llm is None and mem.call_log is None
        with pytest.raises(ConfigError, match="needs an LLM"):
            mem.add("alice", TURN, extract="sync")
    finally:
        mem.close()


def test_an_opened_store_is_accepted_and_a_missing_one_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError):
        Memory.open_store(tmp_path / "none.db", create=False)
    assert list(tmp_path.iterdir()) == []
    store = Memory.open_store(tmp_path / "m.db")
    mem = Memory.open(store, embedder="hashing")
    try:
        assert mem.store is store
    finally:
        mem.close()


def test_embedder_factories_get_the_config_when_they_take_it(tmp_path: Path) -> None:
    seen: list[EmbedderConfig] = []

    def with_config(config: EmbedderConfig) -> Embedder:
        seen.append(config)
        return HashingEmbedder()

    register_embedder("test-with-config", with_config)
    register_embedder("test-without-config", lambda: HashingEmbedder(dim=8))
    config = EmbedderConfig(cache_dir=tmp_path, model="m")
    make_embedder("test-with-config", config)
    assert seen == [config]
    assert make_embedder("test-without-config", config).dim == 8
    mem = Memory.open(tmp_path / "m.db", embedder="test-with-config", cache_dir=tmp_path / "models")
    mem.close()
    assert seen[-1].cache_dir == tmp_path / "models"


def test_the_openai_embedder_names_the_missing_variable() -> None:
    with pytest.raises(ConfigError, match="MEMLANE_EMBED_BASE_URL"):
        make_embedder("openai")
    config = EmbedderConfig(base_url="http://127.0.0.1:9/v1", api_key="k", model="m", dim=4)
    assert make_embedder("openai", config).model_id == "openai:m"
