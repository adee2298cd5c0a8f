"""mem0's ``AsyncMemory`` over memlane: :class:`~memlane.compat.mem0.Memory`'s calls as coroutines.

Each call runs the synchronous facade's method on a bounded thread pool (see
:class:`memlane.core.async_memory.AsyncMemory` for why threads), so the event loop never waits on the
embedder or the store.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from memlane.compat.mem0.memory import Item, Memory
from memlane.core.async_memory import DEFAULT_MAX_WORKERS, OffLoop
from memlane.core.memory import Memory as CoreMemory

P = ParamSpec("P")
R = TypeVar("R")


class AsyncMemory(OffLoop):
    """mem0's ``AsyncMemory`` API on a memlane store; the arguments and results of :class:`Memory`."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        memory: CoreMemory | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ) -> None:
        super().__init__(max_workers, "memlane-mem0")
        self.sync = Memory(config, memory=memory)

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> AsyncMemory:
        return cls(config_dict)

    def _close_wrapped(self) -> None:
        self.sync.close()

    async def add(
        self,
        messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
    ) -> dict[str, builtins.list[Item]]:
        return await self._run(
            self.sync.add,
            messages,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            metadata=metadata,
            infer=infer,
            memory_type=memory_type,
            prompt=prompt,
        )

    async def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        rerank: bool = False,
    ) -> dict[str, builtins.list[Item]]:
        return await self._run(
            self.sync.search,
            query,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            filters=filters,
            top_k=top_k,
            limit=limit,
            threshold=threshold,
            rerank=rerank,
        )

    async def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        limit: int | None = None,
    ) -> dict[str, builtins.list[Item]]:
        return await self._run(
            self.sync.get_all,
            user_id=user_id,
            agent_id=agent_id,
            run_id=run_id,
            filters=filters,
            top_k=top_k,
            limit=limit,
        )

    async def get(self, memory_id: str) -> Item | None:
        return await self._run(self.sync.get, memory_id)

    async def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        data: str | None = None,
    ) -> dict[str, str]:
        return await self._run(self.sync.update, memory_id, text, metadata, data=data)

    async def delete(self, memory_id: str) -> dict[str, str]:
        return await self._run(self.sync.delete, memory_id)

    async def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict[str, str]:
        return await self._run(self.sync.delete_all, user_id, agent_id, run_id)

    async def history(self, memory_id: str) -> builtins.list[Item]:
        return await self._run(self.sync.history, memory_id)

    async def reset(self) -> None:
        await self._run(self.sync.reset)
