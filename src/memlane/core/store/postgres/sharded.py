"""Users spread over several PostgreSQL servers: a :class:`~memlane.core.store.protocol.Store` that routes
every call to the one shard holding the call's user (docs/scaling.md, "Sharding by user").

Routing: a user lives on their home shard (:func:`~memlane.core.store.postgres.shard.home_shard`, a hash of
the name) unless the home shard's ``shard_map`` says they were moved. The router remembers a user's shard
for :data:`ROUTE_TTL_S`; a write that reaches a shard the user has left is refused there (the check follows
the user's row lock) and retried once where the map now points, so a stale route never writes to the wrong
shard. Moves (memlane.core.store.postgres.moves) wait longer than the TTL before they delete a user's old
copy, so a stale read still finds the user's rows.

What is per shard and how the router joins it:

- deletion epochs: each shard keeps its own; :meth:`ShardedStore.deletion_epoch` packs them into one
  integer (:data:`EPOCH_BITS` bits per shard) and a write unpacks its shard's part;
- job ids and block references: each shard numbers its own; the router's are ``local << SHARD_BITS | shard``,
  so a reference of one shard's user is never taken for another shard's block;
- API keys live on their user's shard (deleted and moved with the user); a key is looked up on each shard
  in turn;
- the embedding cache is per shard (an add writes its entries to its user's shard); a read asks each shard
  for what is still missing.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import ConfigError
from memlane.core.jobs import ClaimedJob, ExtractionResult, JobError, JobStatus, LLMOutage, QueueStatus, Requeued
from memlane.core.model import (
    DeletedUser,
    Filters,
    KeyRecord,
    MemoryBlock,
    Page,
    Prompt,
    PromptVersion,
    Session,
    StoredKey,
    UserInfo,
)
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.annsettings import AnnSettings, IndexStatus
from memlane.core.store.check import StoreCheck
from memlane.core.store.postgres.queue import PostgresJobQueue
from memlane.core.store.postgres.shard import FROZEN_USERS, ShardStore, UserMovingError, home_shard

T = TypeVar("T")

ROUTE_TTL_S = 30.0  # how long a router trusts a user's remembered shard (a move waits longer)
EPOCH_BITS = 40  # bits of each shard's deletion epoch in the packed epoch
SHARD_BITS = 10  # at most 1024 shards
MAX_SHARDS = 1 << SHARD_BITS


def pack_epochs(epochs: Sequence[int]) -> int:
    return sum(e << (EPOCH_BITS * i) for i, e in enumerate(epochs))


def shard_epoch(packed: int | None, index: int) -> int | None:
    return None if packed is None else (packed >> (EPOCH_BITS * index)) & ((1 << EPOCH_BITS) - 1)


def job_id_of(local: int, index: int) -> int:
    """The router's id (of a job or a block reference) for shard ``index``'s own ``local`` one."""
    return (local << SHARD_BITS) | index


def split_job_id(job_id: int) -> tuple[int, int]:
    """(shard index, the shard's own id)."""
    return job_id & (MAX_SHARDS - 1), job_id >> SHARD_BITS


def _local_refs(refs: Sequence[int], index: int) -> list[int]:
    """The shard's own references among ``refs`` (the others belong to other shards' users)."""
    return [local for i, local in map(split_job_id, refs) if i == index]


class ShardedStore:
    """N :class:`ShardStore` (one per server, in the order of the store URL) behind the Store protocol."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        schema: str | None = None,
        durability: str = "full",
        pool_max: int = 10,
        timeout_s: float = 30.0,
        create: bool = True,
        accept_counts: tuple[int, ...] = (),
        ann: AnnSettings | None = None,
    ) -> None:
        """``accept_counts``: other shard counts a shard's record may hold (only while the store grows,
        memlane.core.store.postgres.grow)."""
        if not 1 <= len(urls) <= MAX_SHARDS:
            raise ConfigError(f"a sharded store has 1 to {MAX_SHARDS} shards, not {len(urls)}")
        self.urls, self.schema = list(urls), schema
        self.shards: list[ShardStore] = []
        try:
            for i, url in enumerate(urls):
                self.shards.append(
                    ShardStore(
                        url,
                        index=i,
                        count=len(urls),
                        schema=schema,
                        durability=durability,
                        pool_max=pool_max,
                        timeout_s=timeout_s,
                        create=create,
                        accept_counts=accept_counts,
                        ann=ann,
                    )
                )
        except BaseException:
            self.close()
            raise
        self._routes: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        # Reads asked of every shard at once (the epochs an add starts with, a key lookup) run side by side,
        # so they take as long as one read: an add "begins" (reads its epochs) as early as on one server.
        self._fan = ThreadPoolExecutor(max_workers=len(self.shards), thread_name_prefix="memlane-shards")
        self._queue = ShardedJobQueue(self)

    @property
    def count(self) -> int:
        return len(self.shards)

    def close(self) -> None:
        if hasattr(self, "_fan"):
            self._fan.shutdown(wait=True)
        for shard in self.shards:
            shard.close()

    def _each(self, op: Callable[[ShardStore], T]) -> list[T]:
        """``op`` on every shard at the same time; the results in shard order."""
        if len(self.shards) == 1:
            return [op(self.shards[0])]
        return list(self._fan.map(op, self.shards))

    # -- routing -----------------------------------------------------------------------------------------

    def home(self, user: str) -> int:
        return home_shard(user, self.count)

    def shard_of(self, user: str, *, fresh: bool = False) -> int:
        """The index of the shard that holds ``user`` (or will, for a new user)."""
        now = time.monotonic()
        if not fresh:
            with self._lock:
                hit = self._routes.get(user)
            if hit is not None and hit[1] > now:
                return hit[0]
        home = self.home(user)
        mapped = self.shards[home].mapped_shard(user)
        index = home if mapped is None else mapped
        with self._lock:
            if len(self._routes) > 100_000:
                self._routes.clear()
            self._routes[user] = (index, now + ROUTE_TTL_S)
        return index

    def forget_route(self, user: str) -> None:
        with self._lock:
            self._routes.pop(user, None)

    def at(self, user: str) -> ShardStore:
        return self.shards[self.shard_of(user)]

    def _write(self, user: str, op: Callable[[ShardStore], T]) -> T:
        """Run a write on the user's shard; if that shard refuses because the user moved on, once more on
        the shard the map now names. A user frozen for a move stays refused (UserMovingError, a StoreError)."""
        index = self.shard_of(user)
        try:
            return op(self.shards[index])
        except UserMovingError:
            fresh = self.shard_of(user, fresh=True)
            if fresh == index:
                raise
            return op(self.shards[fresh])

    # -- the Store protocol ------------------------------------------------------------------------------

    def bind_embedder(self, model_id: str, dim: int) -> None:
        for shard in self.shards:
            shard.bind_embedder(model_id, dim)

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        return self._write(user, lambda s: s.create_user(user, display_name=display_name, metadata=metadata))

    def get_user(self, user: str) -> UserInfo:
        return self.at(user).get_user(user)

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        return self._write(user, lambda s: s.update_user(user, display_name=display_name, metadata=metadata))

    def find_users(
        self,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        contains: str | None = None,
        metadata_text: Mapping[str, str] | None = None,
    ) -> Page[UserInfo]:
        """Every shard's matching users up to the page's end, merged by name (a user caught between two
        shards by a move counted once, from the shard the map names)."""
        pages = self._each(
            lambda s: s.find_users(
                name=name,
                metadata=metadata,
                limit=offset + limit,
                offset=0,
                contains=contains,
                metadata_text=metadata_text,
            )
        )
        found: dict[str, list[tuple[int, UserInfo]]] = {}
        for index, page in enumerate(pages):
            for info in page.items:
                found.setdefault(info.name, []).append((index, info))
        merged = []
        twice = 0
        for user_name in sorted(found):
            copies = found[user_name]
            if len(copies) > 1:
                twice += len(copies) - 1
                where = self.shard_of(user_name, fresh=True)
                copies = [c for c in copies if c[0] == where] or copies[:1]
            merged.append(copies[0][1])
        return Page(merged[offset : offset + limit], sum(p.total for p in pages) - twice, limit, offset)

    # -- sessions and the memory model: on the user's shard ------------------------------------------------

    def create_session(
        self,
        user: str,
        session_id: str,
        *,
        conversation_id: str,
        started_at: float,
        annotations: Mapping[str, str],
        metadata: Mapping[str, Any],
        default_ttl_s: int | None,
        exist_ok: bool = False,
        now: float,
    ) -> Session:
        return self._write(
            user,
            lambda s: s.create_session(
                user, session_id, conversation_id=conversation_id, started_at=started_at, annotations=annotations,
                metadata=metadata, default_ttl_s=default_ttl_s, exist_ok=exist_ok, now=now,
            ),
        )  # fmt: skip

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        return self.at(user).get_session(user, session_id, now=now)

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        return self.at(user).list_sessions(user, limit=limit, offset=offset, now=now)

    def update_session(
        self,
        user: str,
        session_id: str,
        *,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
        now: float,
    ) -> Session:
        return self._write(
            user,
            lambda s: s.update_session(
                user, session_id, annotations=annotations, metadata=metadata, default_ttl_s=default_ttl_s, now=now
            ),
        )

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        return self._write(user, lambda s: s.end_session(user, session_id, at=at, now=now))

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        return self._write(user, lambda s: s.delete_session(user, session_id))

    def update_block(
        self,
        user: str,
        block: MemoryBlock,
        vectors: Vectors | None,
        *,
        reset_ttl: bool = False,
        default_ttl_s: int = 0,
        enqueue_attempts: int = 0,
        now: float,
    ) -> MemoryBlock:
        return self._write(
            user,
            lambda s: s.update_block(
                user, block, vectors, reset_ttl=reset_ttl, default_ttl_s=default_ttl_s,
                enqueue_attempts=enqueue_attempts, now=now,
            ),
        )  # fmt: skip

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
        now: float,
    ) -> int:
        return self._write(user, lambda s: s.set_ttl(user, ttl_s, session_id=session_id, block_ids=block_ids, now=now))

    def browse_blocks(
        self,
        user: str,
        filters: Filters | None,
        *,
        order: str,
        limit: int,
        offset: int,
        after: float | None = None,
        before: float | None = None,
        now: float,
    ) -> Page[MemoryBlock]:
        return self.at(user).browse_blocks(
            user, filters, order=order, limit=limit, offset=offset, after=after, before=before, now=now
        )

    def expired_users(self, now: float) -> list[str]:
        found = self._each(lambda s: [(s, name) for name in s.expired_users(now)])
        return sorted({name for part in found for shard, name in part if self.at(name) is shard})

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        return self._write(user, lambda s: s.delete_ttl_expired(user, now=now, limit=limit, dry_run=dry_run))

    def requeue_block(self, user: str, block_id: str, *, max_attempts: int, now: float) -> MemoryBlock:
        return self._write(user, lambda s: s.requeue_block(user, block_id, max_attempts=max_attempts, now=now))

    # -- the prompt registry: global, on the first shard (like the default retention policy) --------------

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        return self.shards[0].create_prompt(prompt_id, text, description=description, annotations=annotations, now=now)

    def get_prompt(self, prompt_id: str) -> Prompt:
        return self.shards[0].get_prompt(prompt_id)

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        return self.shards[0].get_prompt_version(prompt_id, version)

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        return self.shards[0].list_prompts(limit=limit, offset=offset, include_archived=include_archived)

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        return self.shards[0].list_prompt_versions(prompt_id, limit=limit, offset=offset)

    def update_prompt(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
        now: float,
    ) -> Prompt:
        return self.shards[0].update_prompt(
            prompt_id, text=text, description=description, annotations=annotations, now=now
        )

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        return self.shards[0].archive_prompt(prompt_id, version, now=now)

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        return self.shards[0].purge_prompt(prompt_id, version)

    def list_users(self) -> list[UserInfo]:
        """Every shard's users by name; a user caught between two shards by a move is listed once, from
        the shard the map names."""
        found: dict[str, list[tuple[int, UserInfo]]] = {}
        for shard in self.shards:
            for info in shard.list_users():
                found.setdefault(info.name, []).append((shard.index, info))
        out = []
        for name in sorted(found):
            copies = found[name]
            if len(copies) > 1:
                where = self.shard_of(name, fresh=True)
                copies = [c for c in copies if c[0] == where] or copies[:1]
            out.append(copies[0][1])
        return out

    def write_blocks(
        self,
        user: str,
        blocks: Sequence[MemoryBlock],
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
        *,
        enqueue_attempts: int = 0,
        epoch: int | None = None,
        default_ttl_s: int = 0,
    ) -> list[int]:
        def op(s: ShardStore) -> list[int]:
            ids = s.write_blocks(
                user,
                blocks,
                vectors,
                cache_entries,
                enqueue_attempts=enqueue_attempts,
                epoch=shard_epoch(epoch, s.index),
                default_ttl_s=default_ttl_s,
            )
            return [job_id_of(j, s.index) for j in ids]

        return self._write(user, op)

    def job_queue(self) -> ShardedJobQueue:
        return self._queue

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        return self.at(user).get_block(user, block_id)

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        return self.at(user).exchange_blocks(user, block_id)

    def list_blocks(
        self,
        user: str,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryBlock]:
        return self.at(user).list_blocks(
            user, conversation_id=conversation_id, session_id=session_id, limit=limit, offset=offset
        )

    def count_blocks(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        return self.at(user).count_blocks(user, conversation_id=conversation_id, session_id=session_id)

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]:
        shard = self.at(user)
        found = shard.fetch_blocks(user, _local_refs(refs, shard.index))
        return {job_id_of(ref, shard.index): block for ref, block in found.items()}

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        shard = self.at(user)
        found = shard.block_positions(user, _local_refs(refs, shard.index))
        return {job_id_of(ref, shard.index): pos for ref, pos in found.items()}

    def delete_block(self, user: str, block_id: str) -> MemoryBlock:
        return self._write(user, lambda s: s.delete_block(user, block_id))

    def delete_user(self, user: str) -> DeletedUser:
        """On the user's shard, in one transaction there (its epoch raised, its tombstone written)."""
        return self._write(user, lambda s: s.delete_user(user))

    def deletion_epoch(self) -> int:
        """Every shard's epoch, packed (:func:`pack_epochs`); an add hands it back to write_blocks."""
        return pack_epochs(self._each(lambda s: s.deletion_epoch()))

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        return self._write(user, lambda s: s.add_api_key(user, key_id, secret_sha256, label, created_at, role))

    def get_api_key(self, key_id: str) -> StoredKey | None:
        """The key from whichever shard holds it, with the packed epochs: the other shards' read before the
        lookup, the key's own shard's in the lookup's snapshot."""
        epochs = self._each(lambda s: s.deletion_epoch())
        for index, stored in enumerate(self._each(lambda s: s.get_api_key(key_id))):
            if stored is not None:
                epochs[index] = stored.epoch
                return dataclasses.replace(stored, epoch=pack_epochs(epochs))
        return None

    def list_api_keys(self, user: str) -> list[KeyRecord]:
        return self.at(user).list_api_keys(user)

    def revoke_api_key(self, user: str, key_id: str) -> bool:
        return self._write(user, lambda s: s.revoke_api_key(user, key_id))

    def vector_candidates(
        self,
        user: str,
        query: Vectors,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        shard = self.at(user)
        found = shard.vector_candidates(
            user, query, k, kinds=kinds, after=after, before=before, filters=filters, now=now
        )
        return [(job_id_of(ref, shard.index), score) for ref, score in found]

    def keyword_candidates(
        self,
        user: str,
        query: str,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
        k1: float = BM25_K1,
        b: float = BM25_B,
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        shard = self.at(user)
        found = shard.keyword_candidates(
            user, query, k, kinds=kinds, after=after, before=before, k1=k1, b=b, filters=filters, now=now
        )
        return [(job_id_of(ref, shard.index), score) for ref, score in found]

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        return self.at(user).session_word_counts(user, query, sessions)

    def build_index(self, user: str) -> IndexStatus:
        return self.at(user).build_index(user)

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """The user's, on their shard; or every user's, by name (a user caught between two shards by a move
        is listed from the shard the map names)."""
        if user is not None:
            return self.at(user).index_status(user)
        found = [(shard, s) for shard in self.shards for s in shard.index_status()]
        return sorted((s for shard, s in found if self.at(s.user) is shard), key=lambda s: s.user)

    # -- retention: the default policy lives on the first shard, a user's own with the user ---------------

    def retention_policies(self) -> Policies:
        default = self.shards[0].retention_policies().default
        users: dict[str, RetentionPolicy] = {}
        for shard in self.shards:
            own = shard.retention_policies().users
            # a user mid-move may have a copy on two shards: the one the user lives on wins
            users.update({name: p for name, p in own.items() if self.at(name) is shard})
        return Policies(default=default, users=users)

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        if user is None:
            self.shards[0].set_retention(None, policy)
        else:
            self._write(user, lambda shard: shard.set_retention(user, policy))

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        return self._write(
            user, lambda shard: shard.delete_expired(user, before=before, keep=keep, limit=limit, dry_run=dry_run)
        )

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for shard in self.shards:
            missing = [h for h in hashes if h not in found]
            if not missing:
                break
            found.update(shard.get_vectors(model_id, missing))
        return found

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None:
        self.shards[0].put_vectors(model_id, items)

    def user_row_counts(self, user: str) -> dict[str, int]:
        """The user's rows on every shard, summed: a deleted (or moved) user leaves nothing behind anywhere."""
        total: dict[str, int] = {}
        for shard in self.shards:
            for table, n in shard.user_row_counts(user).items():
                total[table] = total.get(table, 0) + n
        return total

    def integrity_check(self) -> list[str]:
        return [f"shard {s.index}: {problem}" for s in self.shards for problem in s.integrity_check()]

    def check(self, *, quick: bool = False) -> StoreCheck:
        """Every shard's check, each line naming its shard."""
        total = StoreCheck((), ())
        for shard in self.shards:
            total += shard.check(quick=quick).prefixed(f"shard {shard.index}: ")
        return total

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """Every shard must take a write: a user on a shard that cannot is unavailable."""
        for shard in self.shards:
            shard.probe_write(timeout_s)


class ShardedJobQueue:
    """One queue over every shard's: a worker serves all shards, claiming from each in turn."""

    def __init__(self, store: ShardedStore) -> None:
        self.store = store
        # A requeue leaves alone the users a shard is moving away: their jobs there are fenced.
        self.queues = [PostgresJobQueue(s, frozen_users=FROZEN_USERS) for s in store.shards]
        self._next = 0
        self._lock = threading.Lock()

    def _by_shard(self, job_ids: Sequence[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for job_id in job_ids:
            index, local = split_job_id(job_id)
            if index >= len(self.queues):
                continue  # not an id of this store: no such job
            out.setdefault(index, []).append(local)
        return out

    @staticmethod
    def _global(job: ClaimedJob, index: int) -> ClaimedJob:
        return dataclasses.replace(job, job_id=job_id_of(job.job_id, index), block_ref=job_id_of(job.block_ref, index))

    @staticmethod
    def _local(job: ClaimedJob) -> tuple[int, ClaimedJob]:
        index, local = split_job_id(job.job_id)
        return index, dataclasses.replace(job, job_id=local, block_ref=split_job_id(job.block_ref)[1])

    def claim(self, owner: str, n: int, lease_s: float, *, job_ids: Sequence[int] | None = None) -> list[ClaimedJob]:
        """Up to ``n`` jobs, starting from the shard after the one the last claim started at, so that no
        shard's queue waits behind another's."""
        if job_ids is not None:
            return [
                self._global(job, index)
                for index, local in sorted(self._by_shard(job_ids).items())
                for job in self.queues[index].claim(owner, len(local), lease_s, job_ids=local)
            ]
        with self._lock:
            start = self._next
            self._next = (start + 1) % len(self.queues)
        out: list[ClaimedJob] = []
        for step in range(len(self.queues)):
            if len(out) >= n:
                break
            index = (start + step) % len(self.queues)
            out.extend(self._global(job, index) for job in self.queues[index].claim(owner, n - len(out), lease_s))
        return out

    def extend(self, owner: str, job_ids: Sequence[int], lease_s: float) -> int:
        return sum(self.queues[i].extend(owner, ids, lease_s) for i, ids in self._by_shard(job_ids).items())

    def complete(
        self,
        job: ClaimedJob,
        result: ExtractionResult,
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
    ) -> bool:
        index, local = self._local(job)
        return self.queues[index].complete(local, result, vectors, cache_entries)

    def fail(self, job: ClaimedJob, error: str, raw: str | None, retry_in_s: float) -> JobStatus | None:
        index, local = self._local(job)
        return self.queues[index].fail(local, error, raw, retry_in_s)

    def defer(self, job: ClaimedJob, error: str, retry_in_s: float) -> JobStatus | None:
        index, local = self._local(job)
        return self.queues[index].defer(local, error, retry_in_s)

    def requeue(
        self,
        *,
        user: str | None = None,
        since: float | None = None,
        block_ids: Sequence[str] | None = None,
        dead_only: bool = True,
    ) -> Requeued:
        """On the user's shard only, or on every shard."""
        indexes = range(len(self.queues)) if user is None else [self.store.shard_of(user)]
        total = Requeued()
        for index in indexes:
            total += self.queues[index].requeue(user=user, since=since, block_ids=block_ids, dead_only=dead_only)
        return total

    def statuses(self, job_ids: Sequence[int]) -> dict[int, JobStatus]:
        return {
            job_id_of(local, index): status
            for index, ids in self._by_shard(job_ids).items()
            for local, status in self.queues[index].statuses(ids).items()
        }

    def status(self, *, recent_errors: int = 5) -> QueueStatus:
        parts = [q.status(recent_errors=recent_errors) for q in self.queues]
        ages = [p.oldest_queued_age_s for p in parts if p.oldest_queued_age_s is not None]
        errors: list[JobError] = [
            dataclasses.replace(e, job_id=job_id_of(e.job_id, i)) for i, p in enumerate(parts) for e in p.last_errors
        ]
        errors.sort(key=lambda e: (e.at, e.job_id), reverse=True)
        return QueueStatus(
            queued=sum(p.queued for p in parts),
            running=sum(p.running for p in parts),
            done=sum(p.done for p in parts),
            dead=sum(p.dead for p in parts),
            oldest_queued_age_s=max(ages) if ages else None,
            done_last_5_min=sum(p.done_last_5_min for p in parts),
            last_errors=tuple(errors[:recent_errors]),
            llm_outage=_joined_outage([p.llm_outage for p in parts if p.llm_outage is not None]),
        )


def _joined_outage(parts: Sequence[LLMOutage]) -> LLMOutage | None:
    """The shards' outages as one: all their waiting jobs, since the first failure, the next retry."""
    if not parts:
        return None
    return LLMOutage(
        jobs=sum(p.jobs for p in parts),
        since=min(p.since for p in parts),
        next_try_in_s=min(p.next_try_in_s for p in parts),
        last_error=parts[0].last_error,
    )


def describe(store: ShardedStore) -> list[dict[str, Any]]:
    """Each shard's index, server (password hidden) and user count: what ``memlane shards list`` shows."""
    return [{"shard": s.index, "server": s._where, "users": len(s.list_users())} for s in store.shards]
