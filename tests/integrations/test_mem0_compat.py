"""memlane.compat.mem0.Memory: mem0's own quickstart code runs with its import changed, offline, and each
call returns mem0's shapes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memlane.compat.mem0 import AsyncMemory, Memory, read_config
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import Memory as CoreMemory
from memlane.core.store.sqlite import SqliteStore


class OpenAI:
    """Stands in for the OpenAI client of mem0's quickstart: a scripted assistant that answers from the
    memories it was handed in the system prompt."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, *, model: str, messages: list[dict[str, str]]) -> Any:
        self.prompts.append(messages[0]["content"])
        reply = f"(from {model}) I will remember that."
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=reply))])


@pytest.mark.slow
def test_mem0_readme_quickstart_runs_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # --- mem0 2.2.1 README, "Basic Usage", verbatim but for the import (and the OpenAI stand-in above) ---
    openai_client = OpenAI()
    memory = Memory()

    def chat_with_memories(message: str, user_id: str = "default_user") -> str:
        # Retrieve relevant memories
        relevant_memories = memory.search(query=message, filters={"user_id": user_id}, top_k=3)
        memories_str = "\n".join(f"- {entry['memory']}" for entry in relevant_memories["results"])

        # Generate Assistant response
        system_prompt = (
            f"You are a helpful AI. Answer the question based on query and memories.\nUser Memories:\n{memories_str}"
        )
        messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": message}]
        response = openai_client.chat.completions.create(model="gpt-5-mini", messages=messages)
        assistant_response = response.choices[0].message.content

        # Create new memories from the conversation
        messages.append({"role": "assistant", "content": assistant_response})
        memory.add(messages, user_id=user_id)

        return assistant_response

    # --- end of the quickstart ---
    assert chat_with_memories("My sister Ana moved to Lisbon last spring.", user_id="alice")
    chat_with_memories("I am allergic to peanuts.", user_id="bob")
    chat_with_memories("Where does my sister live now?", user_id="alice")
    # The second question of alice's was answered with her first message among the memories, never bob's.
    assert "Ana moved to Lisbon" in openai_client.prompts[2] and "peanuts" not in openai_client.prompts[2]
    assert (tmp_path / "memlane.db").is_file()
    memory.close()


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    m = Memory(memory=CoreMemory(SqliteStore(tmp_path / "m.db"), HashingEmbedder()))
    yield m
    m.close()


def test_docs_quickstart_shapes(mem: Memory) -> None:
    # mem0's docs, Python quickstart: add a conversation with metadata, then search in the 2.x form.
    messages = [
        {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
        {"role": "assistant", "content": "How about thriller movies? They can be quite engaging."},
        {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
        {"role": "assistant", "content": "Got it! I'll avoid thriller recommendations and suggest sci-fi movies."},
    ]
    added = mem.add(messages, user_id="alice", metadata={"category": "movies"})
    assert [r["event"] for r in added["results"]] == ["ADD", "ADD"]  # two exchanges
    assert "sci-fi" in added["results"][1]["memory"]
    related = mem.search("What kind of movies do I love?", filters={"user_id": "alice"})
    first = related["results"][0]
    assert set(first) >= {"id", "memory", "score", "metadata", "created_at", "updated_at", "user_id", "hash"}
    assert "sci-fi" in first["memory"] and first["metadata"] == {"category": "movies"}
    assert first["user_id"] == "alice" and isinstance(first["score"], float)
    # mem0 1.x form: user_id keyword and limit.
    assert mem.search("movies", user_id="alice", limit=1)["results"][0]["id"] == first["id"]
    assert mem.search("movies", user_id="nobody")["results"] == []
    assert mem.search("movies", filters={"user_id": "alice", "category": "books"})["results"] == []
    assert len(mem.get_all(filters={"user_id": "alice"})["results"]) == 2
    assert len(mem.get_all(user_id="alice", limit=1)["results"]) == 1


def test_get_update_history_delete(mem: Memory) -> None:
    res = mem.add(
        [{"role": "user", "content": "I like tea."}, {"role": "assistant", "content": "Noted!"}],
        user_id="alice",
        agent_id="helper",
        metadata={"topic": "drinks", "user_id": "mallory"},
        infer=False,
    )["results"]
    assert [(r["memory"], r["role"]) for r in res] == [("I like tea.", "user"), ("Noted!", "assistant")]
    mid = res[0]["id"]
    item = mem.get(mid)
    assert item is not None and item["memory"] == "I like tea." and item["agent_id"] == "helper"
    assert item["metadata"] == {"topic": "drinks"} and item["user_id"] == "alice"  # scope never from metadata
    assert mem.get("no-such-id") is None and mem.get(mid.replace("-", "x", 1)) is None

    updated = mem.update(mid, text="I like green tea.", metadata={"strength": "mild"})
    assert updated["message"] == "Memory updated successfully!"
    new = mem.get(updated["id"])
    assert new is not None and new["memory"] == "I like green tea." and new["created_at"] == item["created_at"]
    assert new["metadata"] == {"topic": "drinks", "strength": "mild"} and new["updated_at"] is not None
    assert mem.get(mid) is None  # replaced
    hist = mem.history(updated["id"])
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in hist] == [
        ("ADD", None, "I like tea."),
        ("UPDATE", "I like tea.", "I like green tea."),
    ]
    assert (
        mem.search("green tea", filters={"user_id": "alice", "agent_id": "helper"})["results"][0]["id"]
        == (updated["id"])
    )
    assert mem.search("green tea", filters={"user_id": "alice", "agent_id": "other"})["results"] == []

    assert mem.delete(updated["id"]) == {"message": "Memory deleted successfully!"}
    with pytest.raises(ValueError, match="not found"):
        mem.delete(updated["id"])
    mem.add("A note for bob.", user_id="bob")
    mem.add("An agent-only note.", agent_id="helper")
    assert mem.get_all(agent_id="helper")["results"][0]["memory"].endswith("An agent-only note.")
    mem.delete_all(user_id="alice", agent_id="helper")
    assert mem.get_all(user_id="alice")["results"] == []
    mem.delete_all(user_id="bob")
    assert mem.get_all(user_id="bob")["results"] == []
    mem.reset()
    assert mem.memory.users() == []


def test_infer_runs_memlane_extraction(tmp_path: Path) -> None:
    def reply(messages: Sequence[ChatMessage]) -> str:
        return json.dumps({"summary": "Alice's sister Ana lives in Lisbon.", "facts": ["Ana lives in Lisbon"]})

    core = CoreMemory(SqliteStore(tmp_path / "m.db"), HashingEmbedder(), llm=ScriptedLLM(reply))
    with Memory(memory=core) as mem:
        res = mem.add([{"role": "user", "content": "My sister Ana moved to Lisbon."}], user_id="alice")
        assert res["results"][0]["memory"] == "Alice's sister Ana lives in Lisbon."
        hit = mem.search("Where does Ana live?", filters={"user_id": "alice"})["results"][0]
        assert hit["memory"] == "Alice's sister Ana lives in Lisbon."


def test_bad_input_is_a_clear_value_error(mem: Memory) -> None:
    with pytest.raises(ValueError, match="at least one of 'user_id'"):
        mem.add("hello")
    with pytest.raises(ValueError, match="user_id"):
        mem.search("x", filters={"user_id": "two words"})
    with pytest.raises(ValueError, match="equality only"):
        mem.search("x", filters={"user_id": "a", "n": {"gt": 3}})
    with pytest.raises(ValueError, match="top_k"):
        mem.search("x", user_id="a", top_k=-1)
    with pytest.raises(ValueError, match="messages"):
        mem.add(42, user_id="a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="procedural"):
        mem.add("x", user_id="a", memory_type="procedural_memory")
    with pytest.raises(ValueError, match="JSON"):
        mem.add("x", user_id="a", metadata={"when": object()})
    with pytest.raises(ValueError, match="text or metadata"):
        mem.update("whatever")
    with pytest.raises(ValueError, match="query"):
        mem.search("  ", user_id="nobody")
    assert mem.add([{"role": "system", "content": "Be brief."}], user_id="a") == {"results": []}
    kept = mem.add("Keep me.", user_id="a", infer=False)["results"][0]["id"]
    with pytest.raises(ValueError, match="content"):
        mem.update(kept, text="")
    assert mem.get(kept) is not None  # a refused update loses nothing


def test_from_config_maps_what_it_can_and_warns_about_the_rest(tmp_path: Path) -> None:
    config = {
        "vector_store": {"provider": "qdrant", "config": {"path": str(tmp_path / "qdrant"), "on_disk": True}},
        "embedder": {"provider": "huggingface", "config": {"model": "sentence-transformers/all-MiniLM-L6-v2"}},
        "llm": {"provider": "openai", "config": {"model": "gpt-4.1-nano", "api_key": "sk-test", "temperature": 0}},
        "history_db_path": str(tmp_path / "history.db"),
        "memlane": {"embedder": "hashing"},
    }
    settings = read_config(config)
    assert settings.store == str(tmp_path / "qdrant" / "memlane.db") and settings.embedder == "hashing"
    assert settings.llm is not None and settings.llm.model == "gpt-4.1-nano"
    assert settings.ignored == (
        "history_db_path",
        "vector_store.config.on_disk",
        "vector_store.provider",
        "llm.config.temperature",
    )
    with pytest.warns(UserWarning, match="history_db_path, vector_store.config.on_disk"):
        mem = Memory.from_config(config)
    assert mem.memory.llm is not None
    mem.add("I live in Ghent.", user_id="alice", infer=False)
    mem.close()
    assert (tmp_path / "qdrant" / "memlane.db").is_file()
    assert read_config({"vector_store": {"config": {"path": str(tmp_path / "x.db")}}}).store == str(tmp_path / "x.db")
    pg = read_config({"vector_store": {"provider": "pgvector", "config": {"connection_string": "postgresql://h/db"}}})
    assert pg.store == "postgresql://h/db"
    assert read_config({"embedder": {"provider": "openai", "config": {"model": "text-embedding-3-small"}}}).ignored == (
        "embedder",
    )
    with pytest.raises(ValueError, match=r"config\.vector_store"):
        read_config({"vector_store": "qdrant"})


def test_async_memory_concurrent_users(tmp_path: Path) -> None:
    core = CoreMemory(SqliteStore(tmp_path / "m.db"), HashingEmbedder())

    async def main() -> None:
        async with AsyncMemory(memory=core) as mem:

            async def one(i: int) -> None:
                user = f"u{i}"
                added = await mem.add(f"{user} parks in bay {i}.", user_id=user, infer=False)
                found = await mem.search("which bay do I park in?", filters={"user_id": user})
                assert [r["id"] for r in found["results"]] == [added["results"][0]["id"]]
                assert (await mem.get(added["results"][0]["id"]) or {})["memory"] == f"{user} parks in bay {i}."

            await asyncio.gather(*(one(i) for i in range(20)))
            assert len((await mem.get_all(user_id="u3"))["results"]) == 1
            moved = await mem.update((await mem.get_all(user_id="u3"))["results"][0]["id"], text="Bay 9 now.")
            assert [h["event"] for h in await mem.history(moved["id"])] == ["ADD", "UPDATE"]
            await mem.delete(moved["id"])
            await mem.delete_all(user_id="u4")
            await mem.reset()
            assert (await mem.get_all(user_id="u5"))["results"] == []

    asyncio.run(main())


def test_get_all_lists_an_exchange_of_several_perspectives_once(tmp_path: Path) -> None:
    """A memory written by memlane itself in its default ``dual`` mode (one block per perspective): get_all
    lists the exchange once, as search returns it once; two exchanges of the same text stay two."""
    core = CoreMemory(SqliteStore(tmp_path / "m.db"), HashingEmbedder())
    said = [{"role": "user", "content": "I went to the gym today."}, {"role": "assistant", "content": "Nice!"}]
    core.add("alice", said, time="2023-05-01")
    core.add("alice", said, time="2023-06-01")
    assert len(core.list("alice")) == 4
    with Memory(memory=core) as mem:
        listed = mem.get_all(user_id="alice")["results"]
        found = mem.search("gym", user_id="alice")["results"]
    assert len(listed) == 2 and len(found) == 2
    months = sorted(core.get("alice", r["id"].split("-")[0]).event_time.month for r in listed)
    assert months == [5, 6]
