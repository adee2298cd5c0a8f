"""mem0's ``AsyncMemory`` over memlane: :class:`~memlane.compat.mem0.Memory`'s calls as coroutines.

Each call runs the synchronous facade's method on a bounded thread pool (see
:class:`memlane.core.async_memory.AsyncMemory` for why threads), so the event loop never waits on the
embedder or the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlane.compat.mem0.memory import Memory
from memlane.core.async_memory import DEFAULT_MAX_WORKERS, Awaited, OffLoop
from memlane.core.memory import Memory as CoreMemory


class AsyncMemory(OffLoop):
    """mem0's ``AsyncMemory`` API on a memlane store; the arguments and results of :class:`Memory`."""

    _wraps = "sync"

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

    add = Awaited(Memory.add)
    search = Awaited(Memory.search)
    get_all = Awaited(Memory.get_all)
    get = Awaited(Memory.get)
    update = Awaited(Memory.update)
    delete = Awaited(Memory.delete)
    delete_all = Awaited(Memory.delete_all)
    history = Awaited(Memory.history)
    reset = Awaited(Memory.reset)
