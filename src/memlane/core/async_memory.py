"""The asyncio face of :class:`~memlane.core.memory.Memory`: the same methods, awaited.

>>> from memlane import AsyncMemory
>>> mem = await AsyncMemory.open("memlane.db")                             # doctest: +SKIP
>>> await mem.add("alice", [{"role": "user", "content": "I moved to Ghent."}])  # doctest: +SKIP
>>> [h.block.message for h in await mem.search("alice", "where do I live?")]    # doctest: +SKIP

There is one implementation: every method runs the synchronous :class:`Memory` method of the same name on a
bounded thread pool owned by this object, so embedding and store work never block the event loop. Why
threads and not an async driver: the work that takes the time is the embedder (ONNX Runtime, which releases
the GIL while it computes) and the store (SQLite, which has no async interface; PostgreSQL through psycopg's
pool). Both stores are thread-safe as :class:`Memory` uses them: the SQLite store opens one connection per
thread, so the pool's size bounds the connections it opens, and the PostgreSQL store lends each operation a
connection from its own pool (keep ``max_workers`` at or below that pool's size, 10 by default, or calls wait
for a connection in their thread, never on the loop).

A cancelled call stops waiting, but the work already handed to a thread runs to its end: an ``add`` whose
task was cancelled may still be stored, as with a client that hangs up.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import inspect
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from types import MethodType, TracebackType
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, overload

from memlane.core.errors import ConfigError
from memlane.core.memory import Memory
from memlane.core.memory_model import PromptRegistry
from memlane.core.model import Hit, SearchMode
from memlane.core.retrieval import SearchSettings

# On PostgreSQL, where a search waits on the server, 4 threads ran searches 1.9x as fast as one at a time; on
# SQLite (CPU-bound on 2 cores) more threads add no throughput (scripts/bench_async.py).
DEFAULT_MAX_WORKERS = 4

P = ParamSpec("P")
R = TypeVar("R")
TimeArg = datetime | str | float | None


class OffLoop:
    """Runs a synchronous object's calls as coroutines on a pool of at most ``max_workers`` threads it owns,
    so that the event loop never waits for them. Close it (``await x.close()`` or ``async with``) to wait
    for the calls in flight, stop the threads and close what it wraps (:meth:`_close_wrapped`).

    ``_wraps`` names the attribute that holds the wrapped object, whose methods :class:`Awaited` runs."""

    _wraps: ClassVar[str]

    def __init__(self, max_workers: int, thread_name: str) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigError(f"max_workers must be a positive integer, not {max_workers!r}")
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix=thread_name)
        self._closed = False

    async def _run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self._closed:
            raise ConfigError(f"this {type(self).__name__} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def close(self) -> None:
        """Wait for the calls in flight, stop the threads, close what this wraps."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        self._close_wrapped()

    def _close_wrapped(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class _RunsOffLoop(Protocol):
    _wraps: ClassVar[str]

    async def _run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...


class Awaited(Generic[P, R]):
    """A coroutine method that runs the wrapped object's method of the same name off the loop:
    ``add = Awaited(Memory.add)`` in an :class:`OffLoop` makes ``await async_memory.add(...)`` run
    ``async_memory.memory.add(...)`` on its threads. It takes the method's parameters, docstring and name
    (``help()``, ``inspect.signature``), and type checkers see ``Memory.add``'s parameters with an awaitable
    of its result. ``note`` is added to the docstring where running off the loop changes something."""

    def __init__(self, method: Callable[Concatenate[Any, P], R], note: str = "") -> None:
        name = method.__name__

        async def run(owner: _RunsOffLoop, /, *args: P.args, **kwargs: P.kwargs) -> R:
            # Looked up at each call, as ``owner.memory.add`` written out would be.
            bound: Callable[P, R] = getattr(getattr(owner, owner._wraps), name)
            return await owner._run(bound, *args, **kwargs)

        functools.update_wrapper(run, method)
        if note:
            run.__doc__ = f"{inspect.cleandoc(method.__doc__ or '')}\n\n{note}".strip()
        self.function = run
        # vars(AsyncMemory) shows this object: the same name, docstring and signature as the function.
        functools.update_wrapper(self, run)

    async def __call__(self, owner: _RunsOffLoop, /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Called from the class, as a function defined there would be: ``AsyncMemory.add(mem, ...)``."""
        return await self.function(owner, *args, **kwargs)

    def __set_name__(self, owner: type, name: str) -> None:
        # Named as a method of the class it is in (AsyncMemory.add), not of the one it runs (Memory.add).
        qualname = f"{owner.__qualname__}.{name}"
        self.function.__qualname__ = self.__qualname__ = qualname

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, obj: _RunsOffLoop, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, obj: _RunsOffLoop | None, owner: type) -> Callable[..., Coroutine[Any, Any, R]]:
        if obj is None:
            return self.function
        return MethodType(self.function, obj)


class AsyncMemory(OffLoop):
    """Per-user memory for asyncio code: :class:`Memory`'s methods as coroutines.

    Wraps a :class:`Memory` (``memory``, still usable from threads) and owns a pool of at most
    ``max_workers`` threads that run its calls. Close it (``await mem.close()`` or ``async with``) to stop
    the threads and close the store. Each method takes the arguments of :class:`Memory`'s method of the
    same name and returns its result."""

    _wraps = "memory"

    def __init__(self, memory: Memory, *, max_workers: int = DEFAULT_MAX_WORKERS) -> None:
        super().__init__(max_workers, "memlane-async")
        self.memory = memory

    @classmethod
    async def open(cls, path: str | Path, *, max_workers: int = DEFAULT_MAX_WORKERS, **options: Any) -> AsyncMemory:
        """:meth:`Memory.open` (with the same keyword ``options``: ``embedder``, ``create``, ...) run off the
        loop, since it may load the embedding model and migrate the store."""
        loop = asyncio.get_running_loop()
        memory = await loop.run_in_executor(None, functools.partial(Memory.open, path, **options))
        return cls(memory, max_workers=max_workers)

    def _close_wrapped(self) -> None:
        self.memory.close()

    # -- ingest ------------------------------------------------------------------------------------------

    add = Awaited(Memory.add)
    add_many = Awaited(Memory.add_many)

    # -- extraction --------------------------------------------------------------------------------------

    run_jobs = Awaited(
        Memory.run_jobs,
        note="From AsyncMemory: its pauses between retries sleep in a pool thread, not on the loop; "
        "``on_error`` is called there too.",
    )
    queue_status = Awaited(Memory.queue_status)
    requeue = Awaited(Memory.requeue)
    probe_write = Awaited(Memory.probe_write)

    # -- search ------------------------------------------------------------------------------------------

    search = Awaited(Memory.search)

    async def get_memory(
        self,
        user: str,
        query: str,
        k: int = 10,
        *,
        mode: str | SearchMode | SearchSettings = SearchMode.HYBRID,
        before: TimeArg = None,
        after: TimeArg = None,
        at: TimeArg = None,
    ) -> builtins.list[Hit]:
        """Another name of :meth:`search`."""
        return await self.search(user, query, k, mode=mode, before=before, after=after, at=at)

    # -- blocks and users --------------------------------------------------------------------------------

    get = Awaited(Memory.get)
    exchange = Awaited(Memory.exchange)
    list = Awaited(Memory.list)
    count = Awaited(Memory.count)
    delete = Awaited(Memory.delete)
    delete_blocks = Awaited(Memory.delete_blocks)
    delete_user = Awaited(Memory.delete_user)
    delete_user_counts = Awaited(Memory.delete_user_counts)
    set_retention = Awaited(Memory.set_retention)
    retention = Awaited(Memory.retention)
    retention_policies = Awaited(Memory.retention_policies)
    apply_retention = Awaited(Memory.apply_retention, note="From AsyncMemory: the sweep runs off the event loop.")
    deletion_epoch = Awaited(Memory.deletion_epoch)
    users = Awaited(Memory.users)

    # -- the memory model (docs/design/007-memory-model.md) ----------------------------------------------

    create_user = Awaited(Memory.create_user)
    get_user = Awaited(Memory.get_user)
    update_user = Awaited(Memory.update_user)
    list_users = Awaited(Memory.list_users)
    create_session = Awaited(Memory.create_session)
    get_session = Awaited(Memory.get_session)
    list_sessions = Awaited(Memory.list_sessions)
    update_session = Awaited(Memory.update_session)
    end_session = Awaited(Memory.end_session)
    delete_session = Awaited(Memory.delete_session)
    add_facts = Awaited(Memory.add_facts)
    add_exchanges = Awaited(Memory.add_exchanges)
    update = Awaited(Memory.update)
    set_ttl = Awaited(Memory.set_ttl)
    requeue_block = Awaited(Memory.requeue_block)
    browse = Awaited(Memory.browse)

    @property
    def prompts(self) -> AsyncPromptRegistry:
        """See :attr:`Memory.prompts`: the same registry, its calls awaited."""
        return AsyncPromptRegistry(self, self.memory.prompts)


class AsyncPromptRegistry:
    """:class:`memlane.core.memory_model.PromptRegistry` as coroutines, on its AsyncMemory's threads."""

    _wraps: ClassVar[str] = "_registry"

    def __init__(self, owner: AsyncMemory, registry: PromptRegistry) -> None:
        self._owner = owner
        self._registry = registry

    async def _run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._owner._run(fn, *args, **kwargs)

    create = Awaited(PromptRegistry.create)
    get = Awaited(PromptRegistry.get)
    version = Awaited(PromptRegistry.version)
    list = Awaited(PromptRegistry.list)
    versions = Awaited(PromptRegistry.versions)
    update = Awaited(PromptRegistry.update)
    archive = Awaited(PromptRegistry.archive)
    purge = Awaited(PromptRegistry.purge)
