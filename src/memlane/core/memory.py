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
import secrets
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memlane.core.bounds import (
    MAX_CONCURRENCY,
    MAX_PAGE,
    MAX_PERIOD_S,
    MAX_ROW_ID,
    MIN_WAIT_S,
    check_int,
    check_seconds,
)
from memlane.core.calls import (
    CallLogs,
    default_call_log_of,
    default_call_log_path,
    forget_block_ids,
    forget_blocks,
    forget_user,
    own_call_log,
)
from memlane.core.embedding.protocol import CachedEmbedder, Embedder, EmbedderConfig, EmbeddingCache, make_embedder
from memlane.core.errors import ConfigError, LLMError, NotFoundError, ValidationError
from memlane.core.exchanges import BlockDraft, draft_blocks, parse_messages, parse_mode
from memlane.core.extraction.extractor import ExtractionPrompt, Extractor
from memlane.core.extraction.sync import run_now
from memlane.core.extraction.worker import Worker, retry_delay
from memlane.core.jobs import DEFAULT_LEASE_S, DEFAULT_MAX_ATTEMPTS, JobQueue, JobStatus, QueueStatus, Requeued
from memlane.core.llm.calllog import CallLog
from memlane.core.llm.protocol import LLM
from memlane.core.memory_model import ModelMethods
from memlane.core.memory_retention import RetentionMethods
from memlane.core.model import (
    AddResult,
    DeletedUser,
    ExtractionStatus,
    ExtractMode,
    Filters,
    Hit,
    MemoryBlock,
    Message,
    PerspectiveMode,
    SearchMode,
    UserInfo,
    content_hash,
)
from memlane.core.model_checks import check_filters, check_page, check_ttl
from memlane.core.names import check_name, check_stored_name, check_text
from memlane.core.retrieval import (
    SearchSettings,
    check_k,
    collect,
    explainer,
    hits,
    rank,
    resolve_settings,
    score_kind,
    supersede_ranked,
    with_candidates,
    with_supersedes,
)
from memlane.core.store.annsettings import AnnSettings
from memlane.core.store.protocol import Store
from memlane.core.timefmt import annotate, coerce_time, coerce_time_of_day, now_utc, to_epoch

DEFAULT_CONVERSATION = "default"
DEFAULT_SESSION = "default"


@dataclass(frozen=True, slots=True)
class AddRequest:
    """One ``add`` call as a value, for :meth:`Memory.add_many`."""

    user: str
    messages: Sequence[Mapping[str, Any] | Message]
    conversation_id: str = DEFAULT_CONVERSATION
    session_id: str = DEFAULT_SESSION
    time: datetime | str | float | None = None
    perspective: str | PerspectiveMode = PerspectiveMode.DUAL
    # Free string annotations kept on every block of the add (integrations keep their metadata here).
    annotations: Mapping[str, str] | None = None
    # The blocks' own TTL in seconds (None: the session's default, else the server's; 0: never).
    ttl_s: int | None = None
    # The registry prompt (id, version or None for its current one) that extracts the blocks.
    prompt: tuple[str, int | None] | str | None = None


def new_block_id() -> str:
    """Time-ordered, unguessable: 12 hex digits of milliseconds, then 10 random hex digits."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(5)}"


def _check_annotations(value: Mapping[str, str] | None, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("must be a mapping of strings to strings", where=where)
    for key, text in value.items():
        if not isinstance(key, str) or not isinstance(text, str):
            raise ValidationError(f"keys and values must be strings, not {key!r}: {text!r}", where=where)
        check_text(key, where)
        check_text(text, where)
    return dict(value)


class Memory(ModelMethods, RetentionMethods):
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
        self._shared_cache = embedding_cache is not None
        self.embedder = CachedEmbedder(embedder, embedding_cache or store)
        store.bind_embedder(embedder.model_id, embedder.dim)
        self.queue: JobQueue = store.job_queue()
        self.llm = llm
        self.prompt = prompt or ExtractionPrompt.load()
        if call_log is None and call_log_path is None:
            call_log = own_call_log(store)  # a PostgreSQL store's table: deletes reach it from any process
        self._calls = CallLogs(call_log, call_log_path, close=close_call_log)
        self.max_attempts = max_attempts
        self.default_ttl_s = check_ttl(default_ttl_s, "default_ttl_s") or 0

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
        parameters (:class:`memlane.core.store.annsettings.AnnSettings`; default: its defaults; docs/scaling.md)."""

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
        return self._calls.all(self.llm)

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

    def add_many(
        self, requests: Sequence[AddRequest], *, extract: ExtractMode = "off", epoch: int | None = None
    ) -> list[AddResult]:
        """Several adds with one batched embedding pass: the bulk-ingest path.

        All requests are validated before anything is written; each request is then written in its own
        transaction, so a crash keeps whole adds only. A request whose user was deleted after ``epoch``
        (by default: after this call began) raises UserDeletedError; the requests before it are stored.
        """
        # Read before the slow part (validation, embedding): a deletion after this point refuses the write.
        since = self.store.deletion_epoch() if epoch is None else check_int(epoch, "epoch", 0, MAX_ROW_ID)
        if extract not in ("off", "async", "sync"):
            raise ValidationError(f"extract must be off, async or sync, not {extract!r}", where="extract")
        if extract == "sync" and self.llm is None:
            raise ConfigError("extract='sync' needs an LLM (Memory(..., llm=...) or --llm)")
        status = ExtractionStatus.OFF if extract == "off" else ExtractionStatus.QUEUED
        prepared = [self._prepare(i, r, status) for i, r in enumerate(requests)]
        texts = [b.message for _, blocks, _ in prepared for b in blocks]
        vectors, new_cache = self.embedder.embed_deferred(texts)
        if self._shared_cache and new_cache:
            self.embedder.cache.put_vectors(self.embedder.model_id, new_cache)
            new_cache = {}
        results: list[AddResult] = []
        offset = 0
        for req, blocks, (exchanges, skipped) in prepared:
            # The embedding-cache entries ride along with the first write: one commit, not two.
            cache_entries, new_cache = new_cache, {}
            job_ids = self.store.write_blocks(
                req.user,
                blocks,
                vectors[offset : offset + len(blocks)],
                (self.embedder.model_id, cache_entries),
                enqueue_attempts=0 if extract == "off" else self.max_attempts,
                epoch=since,
                default_ttl_s=self.default_ttl_s,
            )
            outcome = self.run_jobs(job_ids) if extract == "sync" else {}
            offset += len(blocks)
            results.append(
                AddResult(
                    user=req.user,
                    conversation_id=req.conversation_id,
                    session_id=req.session_id,
                    block_ids=tuple(b.id for b in blocks),
                    exchanges=exchanges,
                    skipped_system_messages=skipped,
                    jobs_enqueued=len(job_ids),
                    jobs_done=sum(s is JobStatus.DONE for s in outcome.values()),
                    jobs_failed=sum(s is JobStatus.DEAD for s in outcome.values()),
                )
            )
        return results

    def _prepare(
        self, i: int, req: AddRequest, status: ExtractionStatus
    ) -> tuple[AddRequest, list[MemoryBlock], tuple[int, int]]:
        where = f"requests[{i}]" if i else None

        def at(field: str) -> str:
            return f"{where}.{field}" if where else field

        check_name(req.user, at("user"))
        check_name(req.conversation_id, at("conversation_id"))
        check_name(req.session_id, at("session_id"))
        mode = parse_mode(req.perspective)
        messages = parse_messages(req.messages, where=at("messages"))
        ingest_time = now_utc()
        given, time_of_day = coerce_time_of_day(req.time, where=at("time"))
        drafts, exchanges, skipped = draft_blocks(messages, mode, given or ingest_time, session_time_of_day=time_of_day)
        annotations = _check_annotations(req.annotations, at("annotations"))
        ttl = check_ttl(req.ttl_s, at("ttl_s"))
        prompt = self._resolve_prompt(req.prompt, at("prompt"))
        blocks = [
            dataclasses.replace(
                self._block(req, mode, d, ingest_time, status, annotations),
                ttl_s=ttl,
                prompt_id=prompt[0],
                prompt_version=prompt[1],
            )
            for d in drafts
        ]
        return req, blocks, (exchanges, skipped)

    @staticmethod
    def _block(
        req: AddRequest,
        mode: PerspectiveMode,
        d: BlockDraft,
        ingest_time: datetime,
        status: ExtractionStatus,
        annotations: dict[str, str],
    ) -> MemoryBlock:
        text = d.exchange.text()
        return MemoryBlock(
            id=new_block_id(),
            user=req.user,
            conversation_id=req.conversation_id,
            session_id=req.session_id,
            exchange_index=d.exchange.index,
            perspective=d.perspective,
            mode=mode,
            message=text,
            event_time=d.event_time,
            ingest_time=ingest_time,
            time_annotation=annotate(d.event_time, time_of_day=d.time_of_day),
            content_hash=content_hash(text),
            message_ids=d.exchange.message_ids,
            extraction_status=status,
            annotations=dict(annotations),
        )

    # -- extraction --------------------------------------------------------------------------------------

    def extractor(self) -> Extractor:
        if self.llm is None:
            raise ConfigError("extraction needs an LLM (Memory(..., llm=...) or --llm)")
        return Extractor(self.llm, self.prompt, prompts=self.store.get_prompt_version)

    def run_jobs(
        self,
        job_ids: Sequence[int],
        *,
        retry_pause_s: float = 0.5,
        timeout_s: float | None = None,
        on_error: Callable[[LLMError], None] | None = None,
    ) -> dict[int, JobStatus]:
        """Run the given jobs now, in this thread, with the same code as the workers (synchronous mode).

        A job whose reply was unusable is retried here at once, up to its attempts, and ends ``dead`` with
        its error kept. A server that cannot be reached (the LLM client has already retried it with backoff)
        ends the run: that job (its attempt given back) and the ones not run yet stay ``queued`` for a
        worker, and are left out of the returned outcome. A job a worker claimed first is waited for until it
        is done or dead; a job deleted with its user meanwhile is left out too. ``timeout_s``: return within
        this long, the LLM client's retries and waits included; the jobs not finished by then stay
        ``queued`` for a worker. ``on_error`` sees each LLM error."""
        ids = [check_int(j, f"job_ids[{i}]", 1, MAX_ROW_ID, "a job id") for i, j in enumerate(job_ids)]
        pause = check_seconds(retry_pause_s, "retry_pause_s", 0, MAX_PERIOD_S)
        deadline = None
        if timeout_s is not None:
            deadline = time.monotonic() + check_seconds(timeout_s, "timeout_s", 0, MAX_PERIOD_S)
        return run_now(
            self.queue,
            self.extractor(),
            self.embedder,
            ids,
            retry_pause_s=pause,
            deadline=deadline,
            on_error=on_error,
        )

    def worker(
        self,
        *,
        concurrency: int = 4,
        lease_s: float = DEFAULT_LEASE_S,
        poll_s: float = 1.0,
        retry_in: Callable[[int], float] = retry_delay,
        retention_every_s: float | None = None,
    ) -> Worker:
        """A worker draining this store's queue with this memory's LLM and embedder. ``retry_in(attempts)``
        is the pause before a failed job is tried again (default: exponential backoff with jitter).
        ``retention_every_s``: also run :meth:`apply_retention` when the worker starts and then at this
        interval (None or 0: never)."""
        every = retention_every_s
        if every is not None:
            every = check_seconds(every, "retention_every_s", 0, MAX_PERIOD_S)
        return Worker(
            self.queue,
            self.extractor(),
            self.embedder,
            concurrency=check_int(concurrency, "concurrency", 1, MAX_CONCURRENCY),
            lease_s=check_seconds(lease_s, "lease_s", MIN_WAIT_S, MAX_PERIOD_S),
            poll_s=check_seconds(poll_s, "poll_s", MIN_WAIT_S, MAX_PERIOD_S),
            retry_in=retry_in,
            sweep=self.apply_retention,
            sweep_every_s=every or None,
        )

    def queue_status(self, *, recent_errors: int = 5) -> QueueStatus:
        return self.queue.status(recent_errors=check_int(recent_errors, "recent_errors", 0, MAX_PAGE))

    def requeue(
        self,
        *,
        user: str | None = None,
        since: datetime | str | float | None = None,
        block_ids: Sequence[str] | None = None,
        dead_only: bool = True,
    ) -> Requeued:
        """Queue the dead extraction jobs again, attempts reset and their blocks back to ``queued``; unless
        ``dead_only``, also run now the jobs that wait out a backoff after a failure (an unreachable LLM, an
        unusable reply). Only ``user``'s (NotFoundError for an unknown user), only the jobs of ``block_ids``,
        only those that failed or died at or after ``since``, when given. Idempotent: a second call finds
        nothing to do. Running and done jobs are never touched."""
        if user is not None:
            self._require_user(check_stored_name(user, "user"))
        at = coerce_time(since, where="since")
        if isinstance(block_ids, str):
            raise ValidationError("must be a list of block ids, not one string", where="block_ids")
        ids = None if block_ids is None else [check_text(b, f"block_ids[{i}]") for i, b in enumerate(block_ids)]
        return self.queue.requeue(
            user=user, since=None if at is None else to_epoch(at), block_ids=ids, dead_only=dead_only
        )

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
        # Folding perspectives needs up to two blocks per exchange among the candidates.
        settings = with_candidates(resolve_settings(mode), 2 * k if distinct else k)
        b = coerce_time(before, where="before")
        a = coerce_time(after, where="after")
        asked = coerce_time(at, where="at") or now_utc()
        checked = check_filters(filters)
        found = collect(
            self.store,
            self.embedder.inner,
            user,
            query,
            settings,
            after=to_epoch(a) if a else None,
            before=to_epoch(b) if b else None,
            filters=checked,
        )
        ranked = rank(found, settings, asked=asked)
        # "Newest" is read as of the time asked about: a block told after ``at`` supersedes nothing.
        until = to_epoch(asked) if at is not None else None
        ranked, newer, known = supersede_ranked(
            self.store,
            self.embedder.cache,
            self.embedder.model_id,
            user,
            query,
            ranked,
            settings,
            asked=asked,
            until=until,
            fetch=2 * k if distinct else k,  # what hits reads first
        )
        kind = score_kind(settings)
        why = explainer(found, settings, asked=asked) if explain else None
        top = hits(self.store, user, ranked, k, kind, distinct=distinct, superseded_by=newer, known=known, explain=why)
        top = with_supersedes(top, newer, known)
        if checked is not None and checked.annotations_after_cut and checked.annotations:
            return [h for h in top if checked.admits(h.block)]
        return top

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
            check_stored_name(user, "user"),
            conversation_id=None if conversation_id is None else check_stored_name(conversation_id, "conversation_id"),
            session_id=None if session_id is None else check_stored_name(session_id, "session_id"),
            limit=limit,
            offset=offset,
        )

    def count(self, user: str, *, conversation_id: str | None = None, session_id: str | None = None) -> int:
        """How many blocks :meth:`list` pages through with these filters (0 for an unknown user)."""
        return self.store.count_blocks(
            check_stored_name(user, "user"),
            conversation_id=None if conversation_id is None else check_stored_name(conversation_id, "conversation_id"),
            session_id=None if session_id is None else check_stored_name(session_id, "session_id"),
        )

    def delete(self, user: str, block_id: str) -> None:
        """Delete one block of ``user`` with everything that refers to it: its keys, vectors, jobs, and its
        extraction's LLM calls (:meth:`_call_logs`). NotFoundError if it is not the user's; calls carrying
        the block's id are deleted even then, so a delete that failed halfway can be repeated."""
        user = check_stored_name(user, "user")
        logs = self._call_logs()  # opened first: a call log that cannot be opened stops the delete before it starts
        try:
            block = self.store.delete_block(user, check_text(block_id, "block_id"))
        except NotFoundError:
            forget_block_ids(logs, user, [block_id])
            raise
        forget_blocks(logs, [block])

    def _forget_calls(self, blocks: Sequence[MemoryBlock]) -> int:
        """Delete the LLM calls of ``blocks`` from every call log this memory knows (:meth:`_call_logs`):
        what every path that deletes blocks calls once the blocks are gone. Returns how many rows went."""
        return forget_blocks(self._call_logs(), blocks) if blocks else 0

    def delete_user(self, user: str) -> int:
        """Delete the user and everything of theirs (blocks, search keys, vectors, jobs, API keys, and their
        LLM calls when the call log is known); returns the number of blocks removed. Final: an add in
        flight for the user fails (UserDeletedError) or is deleted with them, and an add that starts
        after this returns starts the user afresh."""
        return self.delete_user_counts(user).blocks

    def delete_user_counts(self, user: str) -> DeletedUser:
        """:meth:`delete_user`, answering how many blocks and API keys went. NotFoundError for an unknown
        user, after deleting any LLM calls still logged under the name (what a delete that failed halfway
        left), so that deleting again finishes the job."""
        user = check_stored_name(user, "user")
        logs = self._call_logs()  # opened first: a call log that cannot be opened stops the delete before it starts
        try:
            deleted = self.store.delete_user(user)
        except NotFoundError:
            forget_user(logs, user)
            raise
        forget_user(logs, user)
        return deleted

    def deletion_epoch(self) -> int:
        """The store's deletion epoch (see :meth:`add`)."""
        return self.store.deletion_epoch()

    def users(self) -> builtins.list[UserInfo]:
        return self.store.list_users()


def _default_log(path: str | Path | Store, store: Store) -> Path | None:
    """The default call log of the store ``Memory.open`` was given (by location, or as an opened store)."""
    return default_call_log_path(path) if isinstance(path, str | Path) else default_call_log_of(store)
