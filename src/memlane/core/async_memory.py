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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar

from memlane.core.errors import ConfigError, LLMError
from memlane.core.jobs import JobStatus, QueueStatus, Requeued
from memlane.core.memory import DEFAULT_CONVERSATION, DEFAULT_SESSION, AddRequest, Memory
from memlane.core.memory_model import KEEP, PromptRegistry
from memlane.core.model import (
    AddResult,
    DeletedUser,
    ExtractMode,
    Filters,
    Hit,
    MemoryBlock,
    Message,
    Page,
    PerspectiveMode,
    Prompt,
    PromptVersion,
    SearchMode,
    Session,
    UserInfo,
)
from memlane.core.retention import Policies, RetentionPolicy, RetentionReport
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
    for the calls in flight, stop the threads and close what it wraps (:meth:`_close_wrapped`)."""

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


class AsyncMemory(OffLoop):
    """Per-user memory for asyncio code: :class:`Memory`'s methods as coroutines.

    Wraps a :class:`Memory` (``memory``, still usable from threads) and owns a pool of at most
    ``max_workers`` threads that run its calls. Close it (``await mem.close()`` or ``async with``) to stop
    the threads and close the store."""

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

    async def add(
        self,
        user: str,
        messages: Sequence[Mapping[str, Any] | Message],
        *,
        conversation_id: str = DEFAULT_CONVERSATION,
        session_id: str = DEFAULT_SESSION,
        time: TimeArg = None,
        perspective: str | PerspectiveMode = PerspectiveMode.DUAL,
        extract: ExtractMode = "off",
        epoch: int | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
    ) -> AddResult:
        """See :meth:`Memory.add`."""
        return await self._run(
            self.memory.add,
            user,
            messages,
            conversation_id=conversation_id,
            session_id=session_id,
            time=time,
            perspective=perspective,
            extract=extract,
            epoch=epoch,
            annotations=annotations,
            ttl_s=ttl_s,
            prompt=prompt,
        )

    async def add_many(
        self, requests: Sequence[AddRequest], *, extract: ExtractMode = "off", epoch: int | None = None
    ) -> builtins.list[AddResult]:
        """See :meth:`Memory.add_many`."""
        return await self._run(self.memory.add_many, requests, extract=extract, epoch=epoch)

    # -- extraction --------------------------------------------------------------------------------------

    async def run_jobs(
        self,
        job_ids: Sequence[int],
        *,
        retry_pause_s: float = 0.5,
        timeout_s: float | None = None,
        on_error: Callable[[LLMError], None] | None = None,
    ) -> dict[int, JobStatus]:
        """See :meth:`Memory.run_jobs` (its pauses between retries sleep in a pool thread, not on the loop;
        ``on_error`` is called there too)."""
        return await self._run(
            self.memory.run_jobs, job_ids, retry_pause_s=retry_pause_s, timeout_s=timeout_s, on_error=on_error
        )

    async def queue_status(self, *, recent_errors: int = 5) -> QueueStatus:
        return await self._run(self.memory.queue_status, recent_errors=recent_errors)

    async def requeue(
        self,
        *,
        user: str | None = None,
        since: datetime | str | float | None = None,
        block_ids: Sequence[str] | None = None,
        dead_only: bool = True,
    ) -> Requeued:
        """See :meth:`Memory.requeue`."""
        return await self._run(self.memory.requeue, user=user, since=since, block_ids=block_ids, dead_only=dead_only)

    async def probe_write(self, timeout_s: float = 5.0) -> None:
        """See :meth:`Memory.probe_write`."""
        await self._run(self.memory.probe_write, timeout_s)

    # -- search ------------------------------------------------------------------------------------------

    async def search(
        self,
        user: str,
        query: str,
        k: int = 10,
        *,
        mode: str | SearchMode | SearchSettings = SearchMode.HYBRID,
        before: TimeArg = None,
        after: TimeArg = None,
        at: TimeArg = None,
        distinct: bool = True,
        filters: Filters | None = None,
        explain: bool = False,
    ) -> builtins.list[Hit]:
        """See :meth:`Memory.search`."""
        return await self._run(
            self.memory.search,
            user,
            query,
            k,
            mode=mode,
            before=before,
            after=after,
            at=at,
            distinct=distinct,
            filters=filters,
            explain=explain,
        )

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

    async def get(self, user: str, block_id: str) -> MemoryBlock:
        """See :meth:`Memory.get`."""
        return await self._run(self.memory.get, user, block_id)

    async def exchange(self, user: str, block_id: str) -> builtins.list[MemoryBlock]:
        """See :meth:`Memory.exchange`."""
        return await self._run(self.memory.exchange, user, block_id)

    async def list(
        self,
        user: str,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[MemoryBlock]:
        """See :meth:`Memory.list`."""
        return await self._run(
            self.memory.list, user, conversation_id=conversation_id, session_id=session_id, limit=limit, offset=offset
        )

    async def count(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """See :meth:`Memory.count`."""
        return await self._run(self.memory.count, user, conversation_id=conversation_id, session_id=session_id)

    async def delete(self, user: str, block_id: str) -> None:
        """See :meth:`Memory.delete`."""
        await self._run(self.memory.delete, user, block_id)

    async def delete_blocks(self, user: str, filters: Filters) -> builtins.list[str]:
        """See :meth:`Memory.delete_blocks`."""
        return await self._run(self.memory.delete_blocks, user, filters)

    async def delete_user(self, user: str) -> int:
        """See :meth:`Memory.delete_user`."""
        return await self._run(self.memory.delete_user, user)

    async def delete_user_counts(self, user: str) -> DeletedUser:
        return await self._run(self.memory.delete_user_counts, user)

    async def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """See :meth:`Memory.set_retention`."""
        await self._run(self.memory.set_retention, user, policy)

    async def retention(self, user: str | None = None) -> tuple[RetentionPolicy | None, str]:
        """See :meth:`Memory.retention`."""
        return await self._run(self.memory.retention, user)

    async def retention_policies(self) -> Policies:
        return await self._run(self.memory.retention_policies)

    async def apply_retention(
        self, *, now: datetime | str | float | None = None, user: str | None = None, dry_run: bool = False
    ) -> RetentionReport:
        """See :meth:`Memory.apply_retention`: a sweep, off the event loop."""
        return await self._run(self.memory.apply_retention, now=now, user=user, dry_run=dry_run)

    async def deletion_epoch(self) -> int:
        return await self._run(self.memory.deletion_epoch)

    async def users(self) -> builtins.list[UserInfo]:
        return await self._run(self.memory.users)

    # -- the memory model (docs/design/007-memory-model.md) ----------------------------------------------

    async def create_user(
        self,
        user: str,
        *,
        display_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        exist_ok: bool = True,
    ) -> bool:
        """See :meth:`Memory.create_user`."""
        return await self._run(
            self.memory.create_user, user, display_name=display_name, metadata=metadata, exist_ok=exist_ok
        )

    async def get_user(self, user: str) -> UserInfo:
        return await self._run(self.memory.get_user, user)

    async def update_user(
        self, user: str, *, display_name: str | None = KEEP, metadata: Mapping[str, Any] | None = KEEP
    ) -> UserInfo:
        """See :meth:`Memory.update_user`."""
        return await self._run(self.memory.update_user, user, display_name=display_name, metadata=metadata)

    async def list_users(
        self,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        contains: str | None = None,
        metadata_text: Mapping[str, str] | None = None,
    ) -> Page[UserInfo]:
        """See :meth:`Memory.list_users`."""
        return await self._run(
            self.memory.list_users,
            name=name,
            metadata=metadata,
            limit=limit,
            offset=offset,
            contains=contains,
            metadata_text=metadata_text,
        )

    async def create_session(
        self,
        user: str,
        session_id: str,
        *,
        conversation_id: str = DEFAULT_CONVERSATION,
        started_at: TimeArg = None,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
        exist_ok: bool = False,
    ) -> Session:
        """See :meth:`Memory.create_session`."""
        return await self._run(
            self.memory.create_session,
            user,
            session_id,
            conversation_id=conversation_id,
            started_at=started_at,
            annotations=annotations,
            metadata=metadata,
            default_ttl_s=default_ttl_s,
            exist_ok=exist_ok,
        )

    async def get_session(self, user: str, session_id: str) -> Session:
        return await self._run(self.memory.get_session, user, session_id)

    async def list_sessions(self, user: str, *, limit: int = 100, offset: int = 0) -> Page[Session]:
        return await self._run(self.memory.list_sessions, user, limit=limit, offset=offset)

    async def update_session(
        self,
        user: str,
        session_id: str,
        *,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
    ) -> Session:
        """See :meth:`Memory.update_session`."""
        return await self._run(
            self.memory.update_session,
            user,
            session_id,
            annotations=annotations,
            metadata=metadata,
            default_ttl_s=default_ttl_s,
        )

    async def end_session(self, user: str, session_id: str, *, at: TimeArg = None) -> Session:
        return await self._run(self.memory.end_session, user, session_id, at=at)

    async def delete_session(self, user: str, session_id: str) -> int:
        return await self._run(self.memory.delete_session, user, session_id)

    async def add_facts(
        self,
        user: str,
        facts: Sequence[str],
        *,
        session_id: str = DEFAULT_SESSION,
        conversation_id: str = DEFAULT_CONVERSATION,
        time: TimeArg = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
        extract: ExtractMode | None = None,
        sync_timeout_s: float | None = None,
        max_tokens: int | None = None,
        max_queued: int | None = None,
    ) -> AddResult:
        """See :meth:`Memory.add_facts`."""
        return await self._run(
            self.memory.add_facts,
            user,
            facts,
            session_id=session_id,
            conversation_id=conversation_id,
            time=time,
            annotations=annotations,
            ttl_s=ttl_s,
            prompt=prompt,
            extract=extract,
            sync_timeout_s=sync_timeout_s,
            max_tokens=max_tokens,
            max_queued=max_queued,
        )

    async def add_exchanges(
        self,
        user: str,
        pairs: Sequence[tuple[str, str]],
        *,
        session_id: str = DEFAULT_SESSION,
        conversation_id: str = DEFAULT_CONVERSATION,
        time: TimeArg = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
        extract: ExtractMode | None = None,
        sync_timeout_s: float | None = None,
        max_tokens: int | None = None,
        max_queued: int | None = None,
    ) -> AddResult:
        """See :meth:`Memory.add_exchanges`."""
        return await self._run(
            self.memory.add_exchanges,
            user,
            pairs,
            session_id=session_id,
            conversation_id=conversation_id,
            time=time,
            annotations=annotations,
            ttl_s=ttl_s,
            prompt=prompt,
            extract=extract,
            sync_timeout_s=sync_timeout_s,
            max_tokens=max_tokens,
            max_queued=max_queued,
        )

    async def update(
        self,
        user: str,
        block_id: str,
        *,
        content: str | None = None,
        sides: tuple[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = KEEP,
        extract: ExtractMode | None = None,
    ) -> MemoryBlock:
        """See :meth:`Memory.update`."""
        return await self._run(
            self.memory.update,
            user,
            block_id,
            content=content,
            sides=sides,
            annotations=annotations,
            ttl_s=ttl_s,
            prompt=prompt,
            extract=extract,
        )

    async def set_ttl(
        self, user: str, ttl_s: int, *, session_id: str | None = None, block_ids: Sequence[str] | None = None
    ) -> int:
        """See :meth:`Memory.set_ttl`."""
        return await self._run(self.memory.set_ttl, user, ttl_s, session_id=session_id, block_ids=block_ids)

    async def requeue_block(self, user: str, block_id: str) -> MemoryBlock:
        return await self._run(self.memory.requeue_block, user, block_id)

    async def browse(
        self,
        user: str,
        filters: Filters | None = None,
        *,
        order: str = "ingested",
        limit: int = 100,
        offset: int = 0,
        before: TimeArg = None,
        after: TimeArg = None,
    ) -> Page[MemoryBlock]:
        """See :meth:`Memory.browse`."""
        return await self._run(
            self.memory.browse, user, filters, order=order, limit=limit, offset=offset, before=before, after=after
        )

    @property
    def prompts(self) -> AsyncPromptRegistry:
        """See :attr:`Memory.prompts`: the same registry, its calls awaited."""
        return AsyncPromptRegistry(self, self.memory.prompts)


class AsyncPromptRegistry:
    """:class:`memlane.core.memory_model.PromptRegistry` as coroutines, on its AsyncMemory's threads."""

    def __init__(self, owner: AsyncMemory, registry: PromptRegistry) -> None:
        self._owner = owner
        self._registry = registry

    async def create(
        self, prompt_id: str, text: str, *, description: str = "", annotations: Mapping[str, str] | None = None
    ) -> Prompt:
        return await self._owner._run(
            self._registry.create, prompt_id, text, description=description, annotations=annotations
        )

    async def get(self, prompt_id: str) -> Prompt:
        return await self._owner._run(self._registry.get, prompt_id)

    async def version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        return await self._owner._run(self._registry.version, prompt_id, version)

    async def list(self, *, limit: int = 100, offset: int = 0, include_archived: bool = False) -> Page[Prompt]:
        return await self._owner._run(
            self._registry.list, limit=limit, offset=offset, include_archived=include_archived
        )

    async def versions(self, prompt_id: str, *, limit: int = 100, offset: int = 0) -> Page[PromptVersion]:
        return await self._owner._run(self._registry.versions, prompt_id, limit=limit, offset=offset)

    async def update(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Prompt:
        return await self._owner._run(
            self._registry.update, prompt_id, text=text, description=description, annotations=annotations
        )

    async def archive(self, prompt_id: str, version: int | None = None) -> Prompt:
        return await self._owner._run(self._registry.archive, prompt_id, version)

    async def purge(self, prompt_id: str, version: int | None = None) -> int:
        return await self._owner._run(self._registry.purge, prompt_id, version)
