"""The store protocol: what the Memory facade needs from any backend.

Every method names the user; a backend enforces the namespace in its own queries. Block references
(``int``) are a backend's internal keys, only meaningful to the same store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.jobs import JobQueue
from memlane.core.model import DeletedUser, KeyRecord, MemoryBlock, StoredKey, UserInfo
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.retention import Expired, Policies, RetentionPolicy
from memlane.core.store.annsettings import IndexStatus
from memlane.core.store.check import StoreCheck


class Store(Protocol):
    def bind_embedder(self, model_id: str, dim: int) -> None: ...

    def create_user(self, user: str) -> bool: ...

    def list_users(self) -> list[UserInfo]: ...

    def write_blocks(
        self,
        user: str,
        blocks: Sequence[MemoryBlock],
        vectors: Vectors,
        cache_entries: tuple[str, dict[str, Vectors]] | None = None,
        *,
        enqueue_attempts: int = 0,
        epoch: int | None = None,
    ) -> list[int]:
        """One add in one transaction; UserDeletedError, writing nothing, if the user was deleted after
        deletion epoch ``epoch`` (what the add read when it began; None: no earlier start to check)."""
        ...

    def job_queue(self) -> JobQueue: ...

    def get_block(self, user: str, block_id: str) -> MemoryBlock: ...

    def list_blocks(
        self,
        user: str,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryBlock]: ...

    def count_blocks(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """How many blocks ``list_blocks`` pages through with these filters."""
        ...

    def fetch_blocks(self, user: str, refs: Sequence[int]) -> dict[int, MemoryBlock]: ...

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time in epoch seconds) of the user's blocks by reference: what
        context rescoring reads."""
        ...

    def delete_block(self, user: str, block_id: str) -> MemoryBlock:
        """Delete one block of ``user`` as completely as delete_user deletes, and return it as it was
        (whose LLM calls the caller then deletes); NotFoundError if it is not the user's."""
        ...

    def retention_policies(self) -> Policies:
        """The default retention policy and every user's own (memlane.core.retention)."""
        ...

    def set_retention(self, user: str | None, policy: RetentionPolicy | None) -> None:
        """Set (``policy`` None: remove) the default policy (``user`` None) or an existing user's own
        (NotFoundError otherwise)."""
        ...

    def delete_expired(
        self, user: str, *, before: float | None, keep: int | None, limit: int | None, dry_run: bool = False
    ) -> Expired:
        """The user's blocks with an event time before ``before`` or beyond the ``keep`` newest (either
        rule; None: no such rule), at most ``limit``, oldest first: decided and, unless ``dry_run``
        (which only counts them), deleted as completely as by delete_user and returned, in one transaction
        that serialises with the user's adds. An unknown user has none."""
        ...

    def delete_user(self, user: str) -> DeletedUser:
        """Everything of the user, API keys included, in one transaction that also raises the deletion
        epoch and records the name's tombstone (memlane.core.store.deletions)."""
        ...

    def deletion_epoch(self) -> int: ...

    def add_api_key(
        self, user: str, key_id: str, secret_sha256: str, label: str, created_at: float, role: str = "read-write"
    ) -> bool:
        """Store a key of an existing user (NotFoundError otherwise); False if ``key_id`` is taken."""
        ...

    def get_api_key(self, key_id: str) -> StoredKey | None:
        """The key with its user and the deletion epoch, read in one snapshot."""
        ...

    def list_api_keys(self, user: str) -> list[KeyRecord]: ...

    def revoke_api_key(self, user: str, key_id: str) -> bool: ...

    def vector_candidates(
        self,
        user: str,
        query: Vectors,
        k: int,
        *,
        kinds: frozenset[str] | None = None,
        after: float | None = None,
        before: float | None = None,
    ) -> list[tuple[int, float]]: ...

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
    ) -> list[tuple[int, float]]: ...

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """What the session-words ranking needs (:class:`memlane.core.ranking.session_words.SessionWordCounts`)
        for ``query`` in the user's sessions' people's words (what the people in the conversation said:
        :func:`memlane.core.ranking.session_words.people_words`), with the user's own statistics: the query
        terms' counts per session, the sessions' lengths, their number and mean length, and the rows of those
        of ``sessions`` (ids) the user has. None when nothing can match (no query term, no session)."""
        ...

    def build_index(self, user: str) -> IndexStatus:
        """Build the user's approximate vector index now, in this thread, or bring it up to date, if the
        user is at or past the store's threshold (``AnnSettings``); NotFoundError for an unknown user."""
        ...

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: every user, by name) stands."""
        ...

    def get_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Vectors]: ...

    def put_vectors(self, model_id: str, items: dict[str, Vectors]) -> None: ...

    def user_row_counts(self, user: str) -> dict[str, int]: ...

    def integrity_check(self) -> list[str]: ...

    def check(self, *, quick: bool = False) -> StoreCheck:
        """The store's integrity: with ``quick``, what is cheap enough to run on a schedule; otherwise
        everything (:class:`memlane.core.store.check.StoreCheck`). Damage found is a problem in the result,
        not an exception."""
        ...

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """Commit one small real write (a row of its own in ``meta``), waiting at most ``timeout_s`` for
        other writers; raise :class:`StoreError` with a ``reason`` when the store cannot take writes now
        (disk full, read-only, locked, unreachable). What a health check runs."""
        ...

    def close(self) -> None: ...
