"""The memory model as a whole (docs/design/007-memory-model.md); each concept's part is in its folder here
(users/, sessions/, blocks/, expiry/, queue/, candidates/, prompts/)."""

from __future__ import annotations

from pathlib import Path

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.sqlite import SqliteStore


def test_async_memory_mirrors_the_memory_model(tmp_path: Path) -> None:
    import asyncio

    from memlane.core.async_memory import AsyncMemory, AsyncPromptRegistry
    from memlane.core.memory_model import PromptRegistry

    mine = {n for n in vars(AsyncPromptRegistry) if not n.startswith("_")}
    assert mine == {n for n in vars(PromptRegistry) if not n.startswith("_")}

    async def run() -> None:
        async with AsyncMemory(Memory(SqliteStore(tmp_path / "a.db"), HashingEmbedder())) as mem:
            await mem.create_user("alice", display_name="Alice")
            await mem.create_session("alice", "s1", annotations={"k": "v"})
            await mem.prompts.create("p", "Remember colours.")
            res = await mem.add_facts("alice", ["Alice likes teal"], session_id="s1", prompt="p", ttl_s=600)
            block = await mem.update("alice", res.block_ids[0], content="Alice likes mauve")
            assert block.message == "Alice likes mauve" and block.prompt_id == "p"
            hits = await mem.search("alice", "mauve", k=1, filters=Filters(sessions=("s1",)))
            assert [h.block.id for h in hits] == [block.id]
            assert (await mem.browse("alice")).total == 1 and (await mem.set_ttl("alice", 0)) == 1
            assert (await mem.end_session("alice", "s1")).ended
            assert (await mem.prompts.get("p")).current_version == 0
            assert (await mem.list_users(name="Alice")).total == 1
            assert await mem.delete_session("alice", "s1") == 1

    asyncio.run(run())
