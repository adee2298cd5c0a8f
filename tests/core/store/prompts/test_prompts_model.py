"""The extraction prompt registry on every backend (docs/design/007-memory-model.md): versions, archive,
purge, and a custom prompt that steers extraction and is recorded on its blocks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from store_samples import chat, reply

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    PromptArchivedError,
    ValidationError,
)
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.protocol import Store

StoreFactory = Callable[[], Store]


def test_the_prompt_registry_versions_archives_and_purges(mem: Memory) -> None:
    reg = mem.prompts
    p = reg.create("travel", "Remember travel plans.", description="trips", annotations={"team": "a"})
    assert (p.current_version, p.version_count, p.text, p.archived) == (0, 1, "Remember travel plans.", False)
    with pytest.raises(AlreadyExistsError):
        reg.create("travel", "again")
    p = reg.update("travel", text="Remember travel plans and dates.", description="trips v2")
    assert (p.current_version, p.version_count, p.description) == (1, 2, "trips v2")
    assert reg.version("travel", 0).text == "Remember travel plans." and not reg.version("travel", 0).is_current
    assert [v.version for v in reg.versions("travel").items] == [1, 0]
    reg.create("food", "Remember food.")
    assert [x.prompt_id for x in reg.list().items] == ["food", "travel"]
    with pytest.raises(ConflictError):
        reg.purge("travel", 1)  # the current version of a prompt that has others
    assert reg.purge("travel", 0) == 1
    with pytest.raises(NotFoundError):
        reg.version("travel", 0)
    reg.archive("food")
    assert [x.prompt_id for x in reg.list().items] == ["travel"] and reg.list(include_archived=True).total == 2
    with pytest.raises(PromptArchivedError):
        reg.update("food", text="x")
    with pytest.raises(PromptArchivedError):
        mem.add_facts("alice", ["x"], prompt="food")
    with pytest.raises(AlreadyExistsError):
        reg.create("food", "reserved while archived")
    assert reg.purge("food") == 1
    assert reg.create("food", "free again").current_version == 0
    with pytest.raises(NotFoundError):
        mem.add_facts("alice", ["x"], prompt=("travel", 9))
    for bad, where in (
        (lambda: reg.create("a b", "x"), "prompt_id"),
        (lambda: reg.create("x" * 129, "x"), "prompt_id"),
        (lambda: reg.create("ok", "x", description="d" * 201), "description"),
        (lambda: reg.create("ok", " "), "text"),
    ):
        with pytest.raises(ValidationError) as err:
            bad()
        assert err.value.where == where
    assert mem.count("alice") == 0


def test_a_custom_prompt_steers_extraction_and_is_recorded(store_factory: StoreFactory) -> None:
    seen: list[str] = []

    def scripted(messages: Sequence[ChatMessage]) -> str:
        seen.append(messages[0]["content"])
        return reply(messages)

    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(scripted))
    if not hasattr(mem.store, "create_session"):
        pytest.skip("this store does not implement the memory model yet")
    try:
        mem.prompts.create("medical", "Only remember medical facts: allergies, medication, conditions.")
        mem.prompts.update("medical", text="Only remember medication names and doses.")
        res = mem.add("alice", chat("I take 5mg of drug X", "noted"), perspective="single", extract="sync",
                      prompt=("medical", 0))  # fmt: skip
        block = mem.get("alice", res.block_ids[0])
        assert (block.prompt_id, block.prompt_version) == ("medical", 0) and block.status == "ready"
        assert "Only remember medical facts: allergies" in seen[-1]
        assert '"summary"' in seen[-1] and '"facts"' in seen[-1]  # memlane's output contract stays
        assert block.extraction_prompt is not None and block.extraction_prompt.startswith("extract-v1@")
        fact = mem.add_facts("alice", ["drug X causes drowsiness"], prompt="medical", extract="sync").block_ids[0]
        assert mem.get("alice", fact).prompt_version == 1 and "medication names and doses" in seen[-1]
        plain = mem.add_facts("alice", ["the sky is blue"], extract="sync").block_ids[0]
        assert mem.get("alice", plain).prompt_id is None and "application adds" not in seen[-1]
        found = mem.browse("alice", Filters(prompt_id="medical", prompt_version=0)).items
        assert [b.id for b in found] == [res.block_ids[0]]
        hits = mem.search("alice", "drug", k=5, filters=Filters(prompt_id="medical"))
        assert {h.block.id for h in hits} == {res.block_ids[0], fact}
    finally:
        mem.close()
