"""The store protocol: what the Memory facade needs from any backend.

Every method names the user; a backend enforces the namespace in its own queries. Block references
(``int``) are a backend's internal keys, only meaningful to the same store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from memlane.core.embedding.protocol import Vectors
from memlane.core.jobs import JobQueue
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
from memlane.core.store.annsettings import IndexStatus
from memlane.core.store.check import StoreCheck
from memlane.core.store.gather import Gather, Gathered


class Store(Protocol):
    def bind_embedder(self, model_id: str, dim: int) -> None: ...

    def create_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> bool:
        """Create the user with its display name and metadata (a JSON object); False, changing nothing, if
        it exists (the caller that asked to create raises AlreadyExistsError)."""
        ...

    def list_users(self) -> list[UserInfo]: ...

    # -- the memory model (docs/design/007-memory-model.md) ----------------------------------------------
    # Times are epoch seconds. ``now`` is the caller's clock (what expiry is decided against): a block whose
    # ``expires_at`` is at or before ``now`` is invisible to every read, as if deleted.

    def get_user(self, user: str) -> UserInfo:
        """The user with display name, metadata, session count and last activity; NotFoundError if unknown."""
        ...

    def update_user(
        self, user: str, *, display_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> UserInfo:
        """Replace what is given (None: keep; ``display_name=""`` clears it); NotFoundError if unknown."""
        ...

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
        """Users by name order whose display name is exactly ``name``, whose metadata holds every
        ``metadata`` pair with an equal JSON value, and every ``metadata_text`` pair read as text (a string
        equal to it, or a number or boolean whose JSON text is), and whose name or display name holds
        ``contains`` ignoring case (its ``%`` and ``_`` are plain characters) (None: no such rule), paged,
        with the total."""
        ...

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
        """Create a session of an existing user (NotFoundError otherwise). A taken id: AlreadyExistsError,
        or with ``exist_ok`` the existing session, unchanged."""
        ...

    def get_session(self, user: str, session_id: str, *, now: float) -> Session:
        """The session with its count of live blocks; NotFoundError for an unknown user or session."""
        ...

    def list_sessions(self, user: str, *, limit: int, offset: int, now: float) -> Page[Session]:
        """The user's sessions, newest started first (then by id), paged, with the total; an unknown user
        has none."""
        ...

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
        """Replace what is given (None: keep; ``default_ttl_s=0`` is "never expire"; the default TTL
        applies to blocks written from now on). SessionEndedError for an ended session, NotFoundError for
        an unknown one."""
        ...

    def end_session(self, user: str, session_id: str, *, at: float, now: float) -> Session:
        """Set the session's end time; SessionEndedError if it has ended already."""
        ...

    def delete_session(self, user: str, session_id: str) -> list[MemoryBlock]:
        """Delete the session and its blocks as completely as delete_user deletes (vectors, terms, keyword
        statistics, jobs, ANN entries; the caller deletes their LLM calls and cached vectors are dropped),
        in one transaction; the blocks as they were. NotFoundError for an unknown session."""
        ...

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
        """Replace the stored block of the same id with ``block`` in one transaction, and return it as
        stored. With ``vectors`` (those of ``block.message``), the content changed: every search key of the
        old block (message, summary, facts) goes, with its vector, term bag, keyword statistics and ANN
        entry, and a message key of the new text is written; summary and facts are cleared. Annotations,
        kind, sides, prompt id/version and ``updated_at`` are written as given. With ``reset_ttl`` the
        expiry becomes ``now`` + the effective TTL (the block's ``ttl_s``, else its session's default, else
        ``default_ttl_s``; 0: never). With ``enqueue_attempts`` the block's extraction is queued again (its
        other jobs are dropped). NotFoundError if the block is not the user's or has expired;
        SessionEndedError if its session has ended."""
        ...

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
        now: float,
    ) -> int:
        """Set the TTL of the user's live blocks (all, one session's, or the listed ones): ``ttl_s`` and an
        expiry of ``now + ttl_s`` (0: never). Returns how many blocks changed. NotFoundError for an unknown
        user or session."""
        ...

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
        """Every live block of the user that passes ``filters`` (annotations always applied) and the
        event-time window [after, before), newest first by ``order`` (``"ingested"``: ingest time,
        ``"event"``: event time; ties by block id, newest first), paged, with the total."""
        ...

    def expired_users(self, now: float) -> list[str]:
        """The users holding a block whose TTL has run out at ``now`` (what the sweep visits)."""
        ...

    def delete_ttl_expired(
        self, user: str, *, now: float, limit: int | None, dry_run: bool = False
    ) -> list[MemoryBlock]:
        """The user's blocks whose TTL has run out at ``now``, at most ``limit``, deleted (unless
        ``dry_run``) as completely as by delete_user in one transaction, and returned as they were."""
        ...

    def requeue_block(self, user: str, block_id: str, *, max_attempts: int, now: float) -> MemoryBlock:
        """Queue the block's extraction again (a new job; its dead ones go), its status back to queued,
        ``last_queued_at`` now; the block as it is then. NotFoundError if unknown or expired;
        ValidationError (where ``block_id``) unless its extraction failed."""
        ...

    # Prompts: one registry for the store (a small reference table, not per user).

    def create_prompt(
        self, prompt_id: str, text: str, *, description: str, annotations: Mapping[str, str], now: float
    ) -> Prompt:
        """Version 0 of a new prompt; AlreadyExistsError if the id is taken (archived ids too)."""
        ...

    def get_prompt(self, prompt_id: str) -> Prompt:
        """The prompt's head (archived ones too); NotFoundError if unknown."""
        ...

    def get_prompt_version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        """One version (None: the current one); NotFoundError if unknown (purged versions too)."""
        ...

    def list_prompts(self, *, limit: int, offset: int, include_archived: bool = False) -> Page[Prompt]:
        """Prompts by id, paged, with the total."""
        ...

    def list_prompt_versions(self, prompt_id: str, *, limit: int, offset: int) -> Page[PromptVersion]:
        """The prompt's versions, newest first, paged, with the total; NotFoundError if unknown."""
        ...

    def update_prompt(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
        now: float,
    ) -> Prompt:
        """Replace what is given; new text adds the next version, which becomes current.
        PromptArchivedError for an archived prompt, NotFoundError for an unknown one."""
        ...

    def archive_prompt(self, prompt_id: str, version: int | None = None, *, now: float) -> Prompt:
        """Archive one version, or with None the whole prompt (its id stays reserved)."""
        ...

    def purge_prompt(self, prompt_id: str, version: int | None = None) -> int:
        """Delete one version (ConflictError for the current one of a prompt that has others), or with
        None the whole prompt (the id is free again); returns how many versions went. Blocks keep the
        id/version they recorded."""
        ...

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
        """One add in one transaction; UserDeletedError, writing nothing, if the user was deleted after
        deletion epoch ``epoch`` (what the add read when it began; None: no earlier start to check).

        Each block's session is created when missing (started at the earliest event time of its blocks,
        its conversation the block's); SessionEndedError, writing nothing, if one has ended. A block's
        ``expires_at`` is decided here: its ``ingest_time`` + its ``ttl_s``, else its session's default TTL,
        else ``default_ttl_s`` (0: never); ``last_queued_at`` is set when a job is enqueued."""
        ...

    def job_queue(self) -> JobQueue: ...

    def get_block(self, user: str, block_id: str) -> MemoryBlock:
        """One block of the user; NotFoundError if it is not the user's or has expired (TTL): every read
        of blocks (get, list, count, fetch, candidates, browse) hides expired blocks at once."""
        ...

    def exchange_blocks(self, user: str, block_id: str) -> list[MemoryBlock]:
        """The user's live blocks of the exchange ``block_id`` belongs to (one per perspective: those that
        share its :attr:`MemoryBlock.exchange_key`), that block first, then by perspective; read through the
        user's index of exchanges, whatever the user's size. NotFoundError if the block is not the user's."""
        ...

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

    def delete_blocks(self, user: str, filters: Filters) -> list[MemoryBlock]:
        """Delete every block of ``user`` that passes ``filters`` (every rule, annotations included; expired
        blocks too) as completely as delete_block deletes one, in one transaction, and return them as they
        were (whose LLM calls the caller then deletes); an unknown user has none."""
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
        filters: Filters | None = None,
        now: float | None = None,
    ) -> list[tuple[int, float]]:
        """The user's top ``k`` blocks by their best key's cosine. ``kinds`` are search-key kinds
        (message, summary, fact). ``filters`` (their pre-cut rules: :attr:`Filters.pre`) restrict the pool
        before the cut, exactly (the ANN path falls back to exact scoring when the pool is too small for
        it); blocks expired at ``now`` (None: the current time) are never candidates."""
        ...

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
        """The user's top ``k`` blocks by BM25 (the user's own statistics, unchanged by filters), with
        ``filters`` and ``now`` as in :meth:`vector_candidates`."""
        ...

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """What the session-words ranking needs (:class:`memlane.core.ranking.session_words.SessionWordCounts`)
        for ``query`` in the user's sessions' people's words (what the people in the conversation said:
        :func:`memlane.core.ranking.session_words.people_words`), with the user's own statistics: the query
        terms' counts per session, the sessions' lengths, their number and mean length, and the rows of those
        of ``sessions`` (ids) the user has. None when nothing can match (no query term, no session)."""
        ...

    def gather(self, user: str, ask: Gather) -> Gathered:
        """Everything one search reads (:class:`memlane.core.store.gather.Gather`) in one call: what
        :func:`memlane.core.store.gather.gather_stepwise` reads through the methods above, and the same."""
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
