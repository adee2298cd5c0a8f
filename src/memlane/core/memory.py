"""The Memory facade: the public Python API of the core.

>>> from memlane.core.memory import Memory
>>> mem = Memory.open("memlane.db")                      # doctest: +SKIP
>>> mem.add("alice", [{"role": "user", "content": "I moved to Ghent."},
...                   {"role": "assistant", "content": "Nice city!"}], time="2023-05-08 13:56")  # doctest: +SKIP
>>> [h.block.message for h in mem.search("alice", "where does she live?", k=3)]  # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memlane.core.calls import CallLogs, default_call_log_of, default_call_log_path, own_call_log
from memlane.core.embedding.protocol import CachedEmbedder, Embedder, EmbedderConfig, EmbeddingCache, make_embedder
from memlane.core.erase import Eraser
from memlane.core.errors import ValidationError
from memlane.core.extraction.extractor import ExtractionPrompt
from memlane.core.extraction.service import Extraction
from memlane.core.ingest import DEFAULT_CONVERSATION, DEFAULT_SESSION, AddRequest, Ingest, new_block_id
from memlane.core.jobs import DEFAULT_MAX_ATTEMPTS, JobQueue
from memlane.core.llm.calllog import CallLog
from memlane.core.llm.protocol import LLM
from memlane.core.memory_model import Blocks, PromptRegistry, Sessions, Users
from memlane.core.memory_retention import Retention
from memlane.core.model import (
    AddResult,
    ExtractMode,
    Filters,
    Hit,
    MemoryBlock,
    Message,
    PerspectiveMode,
    SearchMode,
    UserInfo,
)
from memlane.core.model_checks import check_filters, check_page, check_ttl
from memlane.core.names import check_stored_name, check_text
from memlane.core.retrieval import SearchSettings, check_k, resolve_settings
from memlane.core.retrieval import search as run_search
from memlane.core.services import Settings, Via
from memlane.core.store.blocks import BlockListing
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.protocol import Store
from memlane.core.timefmt import coerce_time, to_epoch

__all__ = ["DEFAULT_CONVERSATION", "DEFAULT_SESSION", "AddRequest", "Memory", "new_block_id"]


class Memory:
    """Per-user memory: add conversation turns, search them back.

    Every call is scoped to exactly one user; the store enforces the namespace in its queries.
    """

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        embedding_cache: EmbeddingCache | None = None,
        llm: LLM | None = None,
        prompt: ExtractionPrompt | None = None,
        call_log: CallLog | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        call_log_path: Path | None = None,
        close_call_log: bool = False,
        default_ttl_s: int = 0,
    ) -> None:
        """``embedding_cache`` (any object with get_vectors/put_vectors, e.g. another SqliteStore) replaces
        the store's own cache, so several stores can share one: the harness keeps one per machine so no
        text is embedded twice across data sets and runs. By default the store caches, and an add's cache
        entries are written in the add's own transaction.

        ``llm`` runs extraction (needed for ``extract="sync"`` and by workers; ``"async"`` only enqueues).
        ``call_log`` is the LLM's call log, so that deleting a block, a user or expired blocks also deletes
        their LLM calls (the LLM's own call log, if it keeps another, is cleaned too). Without one,
        ``call_log_path`` names the call log file to clean: it is opened by the first delete that finds
        it there (a worker in another process may create it later), and closed by :meth:`close`, as is
        ``call_log`` with ``close_call_log`` (it was opened for this memory).

        ``default_ttl_s``: the server's default TTL of blocks whose add and session give none (0: never;
        docs/design/007-memory-model.md)."""
        self.store = store
        self.embedder = CachedEmbedder(embedder, embedding_cache or store)
        store.bind_embedder(embedder.model_id, embedder.dim)
        self.queue: JobQueue = store.job_queue()
        ttl = check_ttl(default_ttl_s, "default_ttl_s") or 0
        self._settings = Settings(llm, prompt or ExtractionPrompt.load(), max_attempts, ttl)
        if call_log is None and call_log_path is None:
            call_log = own_call_log(store)  # a PostgreSQL store's table: deletes reach it from any process
        self._calls = CallLogs(call_log, call_log_path, close=close_call_log)
        # The services (memlane.core.services): each method below that is ``Via(...)`` is one of theirs.
        self._eraser = Eraser(store, self._calls, lambda: self._settings.llm)
        self._retention = Retention(store, self._eraser.forget)
        queue, embedder_, settings = self.queue, self.embedder, self._settings
        self._extraction = Extraction(store, queue, embedder_, settings, self._retention.apply_retention)
        shared = embedding_cache is not None
        self._ingest = Ingest(store, queue, embedder_, settings, self._extraction.run_jobs, shared_cache=shared)
        self._users = Users(store)
        self._sessions = Sessions(store)
        self._blocks = Blocks(store, embedder_, settings, self._eraser.forget)

    @property
    def llm(self) -> LLM | None:
        """The LLM that extracts (None: extraction is queued only); may be replaced on a live memory."""
        return self._settings.llm

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        self._settings.llm = value

    @property
    def prompt(self) -> ExtractionPrompt:
        """memlane's extraction prompt (a registry prompt, when a block names one, adds to it)."""
        return self._settings.prompt

    @property
    def max_attempts(self) -> int:
        """How many attempts an extraction job is allowed."""
        return self._settings.max_attempts

    @max_attempts.setter
    def max_attempts(self, value: int) -> None:
        self._settings.max_attempts = value

    @property
    def default_ttl_s(self) -> int:
        """The server's default TTL of blocks whose add and session give none (0: never)."""
        return self._settings.default_ttl_s

    @classmethod
    def open(
        cls,
        path: str | Path | Store,
        *,
        embedder: str | Embedder = "minilm",
        durability: str = "full",
        create: bool = True,
        server_timeout_s: float = 30.0,
        llm: LLM | None = None,
        call_log: CallLog | str | Path | None = None,
        cache_dir: Path | None = None,
        embedder_config: EmbedderConfig | None = None,
        prompt: ExtractionPrompt | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        ann: AnnSettings | None = None,
        close_call_log: bool = False,
        default_ttl_s: int = 0,
    ) -> Memory:
        """Open (or create) a store with an embedder (by name or instance): a ``postgresql://`` URL opens the
        PostgreSQL store there; anything else is the path of the embedded SQLite store. ``create=False``
        opens only an existing store: StoreNotFoundError, creating nothing, if there is none.
        ``server_timeout_s`` (PostgreSQL): how long an operation waits for the database before StoreError.

        ``llm``, ``prompt``, ``max_attempts`` and ``close_call_log`` are those of :class:`Memory`.
        ``call_log`` is the LLM call log (a :class:`CallLog`, or the path of its file) that deletes clean; by
        default the store's (``STORE.calls.db`` beside a SQLite store, opened only once it exists; a table of
        a PostgreSQL store: :func:`memlane.core.calls.own_call_log`), so that deleting a user or a block
        deletes their LLM calls whoever made them. An embedder by
        name is built with ``embedder_config`` (the ``openai`` embedder's server, the model cache);
        ``cache_dir`` is where MiniLM's built model is kept (default ``~/.cache/memlane``; it overrides
        ``embedder_config.cache_dir``). The core reads no environment variable: ``memlane.settings`` reads
        them at the edge and passes them here. ``path`` may also be a store opened with :meth:`open_store`
        (a caller that must know the store exists before it makes anything else, such as an LLM call log).
        ``ann``: from how many keys a user is searched through a per-user approximate index, and its
        parameters (:class:`memlane.core.store.candidates.annsettings.AnnSettings`; default: its defaults;
        docs/scaling.md)."""

        def open_store() -> Store:
            if not isinstance(path, str | Path):
                return path
            return cls.open_store(
                path, durability=durability, create=create, server_timeout_s=server_timeout_s, ann=ann
            )

        config = embedder_config or EmbedderConfig()
        if cache_dir is not None:
            config = dataclasses.replace(config, cache_dir=Path(cache_dir))
        # A store to be created waits for the embedder (a model that fails to load leaves no empty store
        # behind); one that must exist is looked for first (no model is loaded to say it is missing).
        store = None if create and isinstance(path, str | Path) else open_store()
        try:
            emb = make_embedder(embedder, config) if isinstance(embedder, str) else embedder
            if store is None:
                store = open_store()
            log = call_log if isinstance(call_log, CallLog) else None
            log_path = Path(call_log) if isinstance(call_log, str | Path) else _default_log(path, store)
            return cls(
                store,
                emb,
                llm=llm,
                prompt=prompt,
                call_log=log,
                max_attempts=max_attempts,
                call_log_path=log_path,
                close_call_log=close_call_log,
                default_ttl_s=default_ttl_s,
            )
        except BaseException:
            if store is not None:
                store.close()
            raise

    @staticmethod
    def open_store(
        path: str | Path,
        *,
        durability: str = "full",
        create: bool = True,
        server_timeout_s: float = 30.0,
        ann: AnnSettings | None = None,
    ) -> Store:
        """The store at ``path`` (a ``postgresql://`` URL or a SQLite file), as :meth:`open` opens it."""
        from memlane.core.store.postgres import is_postgres_url, open_postgres
        from memlane.core.store.sqlite import SqliteStore

        if is_postgres_url(path):
            return open_postgres(str(path), durability=durability, create=create, timeout_s=server_timeout_s, ann=ann)
        return SqliteStore(path, durability=durability, create=create, ann=ann)

    @property
    def call_log(self) -> CallLog | None:
        """The LLM call log this memory's deletes clean (None until its file exists, when known by path)."""
        return self._calls.log

    def close(self) -> None:
        """Close the store, and the call log if this memory opened it."""
        self.store.close()
        self._calls.close()

    def _call_logs(self) -> builtins.list[CallLog]:
        """The LLM call logs a delete cleans (:class:`memlane.core.calls.CallLogs`)."""
        return self._eraser.call_logs()

    # -- ingest ------------------------------------------------------------------------------------------

    def add(
        self,
        user: str,
        messages: Sequence[Mapping[str, Any] | Message],
        *,
        conversation_id: str = DEFAULT_CONVERSATION,
        session_id: str = DEFAULT_SESSION,
        time: datetime | str | float | None = None,
        perspective: str | PerspectiveMode = PerspectiveMode.DUAL,
        extract: ExtractMode = "off",
        epoch: int | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
    ) -> AddResult:
        """Store a run of messages as memory blocks, in one transaction.

        ``time`` is the session's time (the event time of exchanges whose messages carry none); it
        defaults to now. Returns when the blocks are durable and searchable. ``extract``: ``"off"``, ``"async"``
        (one extraction job per block, enqueued in the same transaction, run later by a worker) or
        ``"sync"`` (the same jobs, run before returning).

        If the user is deleted while the add is in flight, the add raises UserDeletedError and writes
        nothing (or, if it wrote first, its blocks go with the user). ``epoch`` is the store's deletion
        epoch when the caller learnt the user may be written to (an API key's check does: the key's
        ``VerifiedKey.epoch``); by default it is read when the add begins.

        ``annotations`` (string keys and values) are kept on every block of the add, as
        ``MemoryBlock.annotations``. ``ttl_s``: the blocks' TTL in seconds (None: their session's default,
        else the server's; 0: never). ``prompt``: the registry prompt that extracts them (an id, or (id,
        version); see :attr:`prompts`). Into an ended session: SessionEndedError, nothing written.
        """
        req = AddRequest(user, messages, conversation_id, session_id, time, perspective, annotations, ttl_s, prompt)
        return self.add_many([req], extract=extract, epoch=epoch)[0]

    add_many = Via("_ingest", Ingest.add_many)
    add_facts = Via("_ingest", Ingest.add_facts)
    add_exchanges = Via("_ingest", Ingest.add_exchanges)

    # -- extraction --------------------------------------------------------------------------------------

    extractor = Via("_extraction", Extraction.extractor)
    run_jobs = Via("_extraction", Extraction.run_jobs)
    worker = Via("_extraction", Extraction.worker)
    queue_status = Via("_extraction", Extraction.queue_status)
    requeue = Via("_extraction", Extraction.requeue)

    def probe_write(self, timeout_s: float = 5.0) -> None:
        """Raise StoreError (with a ``reason``) unless the store can take a write now: one small real
        write, committed (see :meth:`Store.probe_write`)."""
        self.store.probe_write(timeout_s)

    # -- search ------------------------------------------------------------------------------------------

    def search(
        self,
        user: str,
        query: str,
        k: int = 10,
        *,
        mode: str | SearchMode | SearchSettings = SearchMode.HYBRID,
        before: datetime | str | float | None = None,
        after: datetime | str | float | None = None,
        at: datetime | str | float | None = None,
        distinct: bool = True,
        filters: Filters | None = None,
        explain: bool = False,
    ) -> list[Hit]:
        """The user's top-k memories for ``query``; ``before``/``after`` bound the event time (exclusive,
        inclusive). ``mode`` is a preset name (vector, keyword, hybrid, ...) or :class:`SearchSettings`.
        ``at`` is when the question is asked (default: now): the query's time phrases ("two weeks ago",
        "last month") are read against it, and the blocks they point at are preferred, not required.

        With ``distinct`` (the default) each exchange is returned once, as its best-scoring perspective,
        with the ids of its other perspectives' matching blocks in ``Hit.other_perspectives``: k hits are k
        different exchanges. ``distinct=False`` returns the k best blocks as they are (what the benchmarks
        score). ``Hit.score_kind`` says what the scores are.

        ``filters`` (:class:`memlane.core.model.Filters`) restrict the answer exactly, in every mode: their
        rules narrow the candidates before the top-k cut (annotations too, unless
        ``filters.annotations_after_cut``: then the top k are filtered after it and fewer may remain).
        Expired blocks are never returned.

        ``explain`` gives each hit an :class:`memlane.core.model.Explanation` of its score (each retriever's
        rank, score and margin, the context gains, the time phrases its event time matched, the older
        blocks it was moved above); the hits and their order are the same either way."""
        check_stored_name(user, "user")
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("empty query", where="query")
        check_text(query, "query")
        check_k(k)
        settings = resolve_settings(mode)
        b = coerce_time(before, where="before")
        a = coerce_time(after, where="after")
        return run_search(
            self.store,
            self.embedder.inner,
            self.embedder.cache,
            self.embedder.model_id,
            user,
            query,
            settings,
            k,
            at=coerce_time(at, where="at"),
            after=to_epoch(a) if a else None,
            before=to_epoch(b) if b else None,
            filters=check_filters(filters),
            distinct=distinct,
            explain=explain,
        )

    def get_memory(
        self,
        user: str,
        query: str,
        k: int = 10,
        *,
        mode: str | SearchMode | SearchSettings = SearchMode.HYBRID,
        before: datetime | str | float | None = None,
        after: datetime | str | float | None = None,
        at: datetime | str | float | None = None,
    ) -> list[Hit]:
        """Deprecated: another name of :meth:`search` (as some agent-memory APIs call it), kept for one
        release; call :meth:`search`."""
        warnings.warn(
            "Memory.get_memory is deprecated and will be removed; call Memory.search", DeprecationWarning, stacklevel=2
        )
        return self.search(user, query, k, mode=mode, before=before, after=after, at=at)

    # -- blocks and users --------------------------------------------------------------------------------

    def get(self, user: str, block_id: str) -> MemoryBlock:
        """One block of ``user``; NotFoundError if it does not exist or belongs to someone else."""
        return self.store.get_block(check_stored_name(user, "user"), check_text(block_id, "block_id"))

    def list(
        self,
        user: str,
        *,
        conversation_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[MemoryBlock]:
        """The user's blocks in event-time order."""
        limit, offset = check_page(limit, offset)
        return self.store.list_blocks(
            check_stored_name(user, "user"), _listing(conversation_id, session_id), limit=limit, offset=offset
        )

    def count(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """How many blocks :meth:`list` pages through with these filters (0 for an unknown user)."""
        return self.store.count_blocks(check_stored_name(user, "user"), _listing(conversation_id, session_id))

    delete = Via("_eraser", Eraser.delete)
    delete_blocks = Via("_eraser", Eraser.delete_blocks)
    delete_session = Via("_eraser", Eraser.delete_session)
    delete_user_counts = Via("_eraser", Eraser.delete_user_counts)

    def delete_user(self, user: str) -> int:
        """Delete the user and everything of theirs (blocks, search keys, vectors, jobs, API keys, and their
        LLM calls when the call log is known); returns the number of blocks removed. Final: an add in
        flight for the user fails (UserDeletedError) or is deleted with them, and an add that starts
        after this returns starts the user afresh."""
        return self.delete_user_counts(user).blocks

    def deletion_epoch(self) -> int:
        """The store's deletion epoch (see :meth:`add`)."""
        return self.store.deletion_epoch()

    def users(self) -> builtins.list[UserInfo]:
        """Every user with how many blocks they hold."""
        return self.store.list_users()

    # -- the memory model (memlane.core.memory_model) -----------------------------------------------------

    create_user = Via("_users", Users.create_user)
    get_user = Via("_users", Users.get_user)
    update_user = Via("_users", Users.update_user)
    list_users = Via("_users", Users.list_users)
    create_session = Via("_sessions", Sessions.create_session)
    get_session = Via("_sessions", Sessions.get_session)
    list_sessions = Via("_sessions", Sessions.list_sessions)
    update_session = Via("_sessions", Sessions.update_session)
    end_session = Via("_sessions", Sessions.end_session)
    exchange = Via("_blocks", Blocks.exchange)
    update = Via("_blocks", Blocks.update)
    set_ttl = Via("_blocks", Blocks.set_ttl)
    requeue_block = Via("_blocks", Blocks.requeue_block)
    browse = Via("_blocks", Blocks.browse)

    @property
    def prompts(self) -> PromptRegistry:
        """The registry of named extraction prompts (one per store)."""
        return PromptRegistry(self.store)

    # -- retention (memlane.core.memory_retention) --------------------------------------------------------

    set_retention = Via("_retention", Retention.set_retention)
    retention = Via("_retention", Retention.retention)
    retention_policies = Via("_retention", Retention.retention_policies)
    apply_retention = Via("_retention", Retention.apply_retention)


def _listing(conversation_id: str | None, session_id: str | None) -> BlockListing:
    """The listing of :meth:`Memory.list` and :meth:`Memory.count`, its names checked."""
    return BlockListing(
        None if conversation_id is None else check_stored_name(conversation_id, "conversation_id"),
        None if session_id is None else check_stored_name(session_id, "session_id"),
    )


def _default_log(path: str | Path | Store, store: Store) -> Path | None:
    """The default call log of the store ``Memory.open`` was given (by location, or as an opened store)."""
    return default_call_log_path(path) if isinstance(path, str | Path) else default_call_log_of(store)
