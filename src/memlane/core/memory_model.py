"""The memory model through the Memory facade (docs/design/007-memory-model.md): users with names and
metadata, first-class sessions, fact and exchange blocks, updates in place, per-block TTL, the query-less
browse and the extraction prompt registry. A part of :class:`memlane.core.memory.Memory`, kept apart for
size."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from time import monotonic
from typing import TYPE_CHECKING, Any

from memlane.core.bounds import MAX_PERIOD_S, check_seconds
from memlane.core.errors import ConfigError, LLMError, ValidationError
from memlane.core.exchanges import EXCHANGE_PERSPECTIVE
from memlane.core.jobs import JobStatus
from memlane.core.model import (
    ASSISTANT_ROLE,
    USER_ROLE,
    AddResult,
    BlockKind,
    ExtractionStatus,
    ExtractMode,
    Filters,
    MemoryBlock,
    Page,
    PerspectiveMode,
    Prompt,
    PromptVersion,
    Session,
    UserInfo,
    content_hash,
)
from memlane.core.model_checks import (
    check_annotations,
    check_description,
    check_filters,
    check_ids,
    check_metadata,
    check_page,
    check_prompt_id,
    check_prompt_ref,
    check_prompt_text,
    check_ttl,
    check_version,
)
from memlane.core.names import check_name, check_stored_name, check_text
from memlane.core.store.protocol import Store
from memlane.core.timefmt import annotate, coerce_time_of_day, now_utc, to_epoch

if TYPE_CHECKING:
    from memlane.core.embedding.protocol import CachedEmbedder
    from memlane.core.llm.protocol import LLM

FACT_PERSPECTIVE = "fact"
DEFAULT_CONVERSATION = "default"
DEFAULT_SESSION = "default"


class _Keep:
    """The default of an argument that, omitted, leaves the stored value as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def _now() -> float:
    return to_epoch(now_utc())


def _extract_mode(extract: ExtractMode | None) -> ExtractMode:
    mode = "off" if extract is None else extract
    if mode not in ("off", "async", "sync"):
        raise ValidationError(f"extract must be off, async or sync, not {extract!r}", where="extract")
    return mode


def exchange_text(user_content: str, assistant_content: str) -> str:
    """An exchange's display text from its two sides (a side that is empty is left out)."""
    lines = [f"{USER_ROLE}: {user_content}"] if user_content else []
    if assistant_content:
        lines.append(f"{ASSISTANT_ROLE}: {assistant_content}")
    return "\n".join(lines)


def _check_side_pair(pair: object, where: str) -> tuple[str, str]:
    if not isinstance(pair, tuple | list) or len(pair) != 2:
        raise ValidationError("must be a (user_content, assistant_content) pair", where=where)
    user_content, assistant_content = pair
    if not isinstance(user_content, str) or not isinstance(assistant_content, str):
        raise ValidationError("both sides are strings ('' for a missing side)", where=where)
    if not user_content.strip() and not assistant_content.strip():
        raise ValidationError("at least one side must have content", where=where)
    return check_text(user_content, f"{where}[0]"), check_text(assistant_content, f"{where}[1]")


class ModelMethods:
    """The memory model's methods of :class:`memlane.core.memory.Memory`."""

    store: Store
    embedder: CachedEmbedder
    max_attempts: int
    default_ttl_s: int
    llm: LLM | None
    _shared_cache: bool

    def _forget_calls(self, blocks: Sequence[MemoryBlock]) -> int:
        raise NotImplementedError  # Memory's

    def run_jobs(
        self,
        job_ids: Sequence[int],
        *,
        retry_pause_s: float = 0.5,
        timeout_s: float | None = None,
        on_error: Callable[[LLMError], None] | None = None,
    ) -> dict[int, JobStatus]:
        raise NotImplementedError  # Memory's

    # -- users -------------------------------------------------------------------------------------------

    def create_user(
        self,
        user: str,
        *,
        display_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        exist_ok: bool = True,
    ) -> bool:
        """Create a user (namespace) with a display name and metadata (a JSON object). Returns False if it
        existed (nothing changed), or with ``exist_ok=False`` raises AlreadyExistsError."""
        from memlane.core.errors import AlreadyExistsError

        check_name(user, "user")
        name = None if display_name is None else check_text(self._display_name(display_name), "display_name")
        meta = check_metadata(metadata, "metadata")
        created = self.store.create_user(user, display_name=name, metadata=meta)
        if not created and not exist_ok:
            raise AlreadyExistsError("user", user)
        return created

    @staticmethod
    def _display_name(value: object) -> str:
        if not isinstance(value, str):
            raise ValidationError("must be a string", where="display_name")
        if len(value) > 256:
            raise ValidationError("longer than 256 characters", where="display_name")
        return value

    @staticmethod
    def _search_text(value: object) -> str:
        if not isinstance(value, str):
            raise ValidationError("must be a string", where="contains")
        if len(value) > 256:
            raise ValidationError("longer than 256 characters", where="contains")
        return check_text(value, "contains")

    def exchange(self, user: str, block_id: str) -> builtins.list[MemoryBlock]:
        """The block and the other perspectives of its exchange (``dual`` and ``speakers`` modes store one
        block per perspective): the block first, then the others by perspective. NotFoundError if the block
        does not exist or belongs to someone else."""
        return self.store.exchange_blocks(check_stored_name(user, "user"), check_text(block_id, "block_id"))

    def get_user(self, user: str) -> UserInfo:
        """The user with display name, metadata, live block and session counts, last activity."""
        return self.store.get_user(check_stored_name(user, "user"))

    def update_user(
        self, user: str, *, display_name: str | None = KEEP, metadata: Mapping[str, Any] | None = KEEP
    ) -> UserInfo:
        """Replace the display name and/or metadata (omitted: kept; ``display_name=None`` clears it,
        ``metadata=None`` empties it). NotFoundError for an unknown user."""
        user = check_stored_name(user, "user")
        name: str | None = None
        if display_name is not KEEP:
            name = "" if display_name is None else check_text(self._display_name(display_name), "display_name")
        meta: Mapping[str, Any] | None = None
        if metadata is not KEEP:
            meta = {} if metadata is None else check_metadata(metadata, "metadata")
        return self.store.update_user(user, display_name=name, metadata=meta)

    def list_users(
        self,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
        contains: str | None = None,
        metadata_text: Mapping[str, str] | None = None,
    ) -> Page[UserInfo]:
        """Users by name, paged with a total: only those whose display name is exactly ``name``, whose
        metadata holds every ``metadata`` pair (equal JSON values) and every ``metadata_text`` pair read as
        text (a string equal to it, or a number or boolean whose JSON text is: ``"3"`` finds 3 and "3",
        ``"true"`` finds true; never a list, an object or null), and whose name or display name holds
        ``contains`` ignoring case (``%`` and ``_`` are plain characters; on SQLite only ASCII letters fold
        case), when given."""
        limit, offset = check_page(limit, offset)
        wanted = None if name is None else check_text(self._display_name(name), "name")
        part = None if contains is None else self._search_text(contains)
        texts = check_metadata(metadata_text, "metadata_text")
        if texts is not None and not all(isinstance(v, str) for v in texts.values()):
            raise ValidationError("values are strings, each matched as text", where="metadata_text")
        return self.store.find_users(
            name=wanted,
            metadata=check_metadata(metadata, "metadata"),
            limit=limit,
            offset=offset,
            contains=part or None,
            metadata_text=texts,
        )

    # -- sessions ----------------------------------------------------------------------------------------

    def create_session(
        self,
        user: str,
        session_id: str,
        *,
        conversation_id: str = DEFAULT_CONVERSATION,
        started_at: datetime | str | float | None = None,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
        exist_ok: bool = False,
    ) -> Session:
        """Create a session of an existing user (NotFoundError otherwise); a taken id raises
        AlreadyExistsError unless ``exist_ok`` (then the existing session is returned as it is).
        ``default_ttl_s``: the TTL of its blocks that give none (None: the server's default)."""
        user = check_stored_name(user, "user")
        check_name(session_id, "session_id")
        check_name(conversation_id, "conversation_id")
        start, _ = coerce_time_of_day(started_at, where="started_at")
        now = _now()
        return self.store.create_session(
            user,
            session_id,
            conversation_id=conversation_id,
            started_at=now if start is None else to_epoch(start),
            annotations=check_annotations(annotations, "annotations") or {},
            metadata=check_metadata(metadata, "metadata") or {},
            default_ttl_s=check_ttl(default_ttl_s, "default_ttl_s"),
            exist_ok=exist_ok,
            now=now,
        )

    def get_session(self, user: str, session_id: str) -> Session:
        return self.store.get_session(
            check_stored_name(user, "user"), check_stored_name(session_id, "session_id"), now=_now()
        )

    def list_sessions(self, user: str, *, limit: int = 100, offset: int = 0) -> Page[Session]:
        """The user's sessions, newest started first, paged, with the total."""
        limit, offset = check_page(limit, offset)
        return self.store.list_sessions(check_stored_name(user, "user"), limit=limit, offset=offset, now=_now())

    def update_session(
        self,
        user: str,
        session_id: str,
        *,
        annotations: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        default_ttl_s: int | None = None,
    ) -> Session:
        """Replace what is given (None: kept). SessionEndedError for an ended session."""
        return self.store.update_session(
            check_stored_name(user, "user"),
            check_stored_name(session_id, "session_id"),
            annotations=check_annotations(annotations, "annotations"),
            metadata=check_metadata(metadata, "metadata"),
            default_ttl_s=check_ttl(default_ttl_s, "default_ttl_s"),
            now=_now(),
        )

    def end_session(self, user: str, session_id: str, *, at: datetime | str | float | None = None) -> Session:
        """End the session (at ``at``, default now): its blocks stay readable and searchable; new writes
        and updates are refused (SessionEndedError), as is ending it again."""
        when, _ = coerce_time_of_day(at, where="at")
        now = _now()
        return self.store.end_session(
            check_stored_name(user, "user"),
            check_stored_name(session_id, "session_id"),
            at=now if when is None else to_epoch(when),
            now=now,
        )

    def delete_session(self, user: str, session_id: str) -> int:
        """Delete the session and its blocks as completely as :meth:`delete_user` deletes (keys, vectors,
        keyword statistics, jobs, ANN entries, cached vectors and LLM calls); returns how many blocks went."""
        user = check_stored_name(user, "user")
        blocks = self.store.delete_session(user, check_stored_name(session_id, "session_id"))
        self._forget_calls(blocks)
        return len(blocks)

    # -- fact and exchange blocks ------------------------------------------------------------------------

    def add_facts(
        self,
        user: str,
        facts: Sequence[str],
        *,
        session_id: str = DEFAULT_SESSION,
        conversation_id: str = DEFAULT_CONVERSATION,
        time: datetime | str | float | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
        extract: ExtractMode | None = None,
        sync_timeout_s: float | None = None,
    ) -> AddResult:
        """One FACT block per fact, in one transaction (``time``: their event time, default now).
        ``sync_timeout_s``: how long ``extract="sync"`` may take, from the call, the LLM client's retries and
        waits included; the jobs not finished by then stay queued for a worker (:class:`AddResult` says
        so: ``jobs_done``, ``extraction_error``)."""
        if isinstance(facts, str) or not isinstance(facts, Sequence):
            raise ValidationError("must be a list of facts, not one string", where="facts")
        if not facts:
            raise ValidationError("no facts given", where="facts")
        texts: builtins.list[str] = []
        for i, fact in enumerate(facts):
            if not isinstance(fact, str) or not fact.strip():
                raise ValidationError("a fact is non-empty text", where=f"facts[{i}]")
            texts.append(check_text(fact, f"facts[{i}]"))
        items = [(FACT_PERSPECTIVE, t, ()) for t in texts]
        return self._add_model_blocks(
            user,
            BlockKind.FACT,
            items,
            session_id,
            conversation_id,
            time,
            annotations,
            ttl_s,
            prompt,
            extract,
            sync_timeout_s,
        )

    def add_exchanges(
        self,
        user: str,
        pairs: Sequence[tuple[str, str]],
        *,
        session_id: str = DEFAULT_SESSION,
        conversation_id: str = DEFAULT_CONVERSATION,
        time: datetime | str | float | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
        extract: ExtractMode | None = None,
        sync_timeout_s: float | None = None,
    ) -> AddResult:
        """One EXCHANGE block per (user_content, assistant_content) pair, its two sides kept as given
        (either may be "" but not both); one perspective per exchange (single mode). ``sync_timeout_s``: as
        :meth:`add_facts`'s."""
        if isinstance(pairs, str) or not isinstance(pairs, Sequence):
            raise ValidationError("must be a list of (user_content, assistant_content) pairs", where="pairs")
        if not pairs:
            raise ValidationError("no exchanges given", where="pairs")
        items = []
        for i, pair in enumerate(pairs):
            u, a = _check_side_pair(pair, f"pairs[{i}]")
            items.append((EXCHANGE_PERSPECTIVE, exchange_text(u, a), ((USER_ROLE, u), (ASSISTANT_ROLE, a))))
        return self._add_model_blocks(
            user,
            BlockKind.EXCHANGE,
            items,
            session_id,
            conversation_id,
            time,
            annotations,
            ttl_s,
            prompt,
            extract,
            sync_timeout_s,
        )

    def _resolve_prompt(self, prompt: object, where: str = "prompt") -> tuple[str | None, int | None]:
        """The registry prompt an add or update names, as (id, version): NotFoundError for an unknown
        one, PromptArchivedError for an archived one."""
        from memlane.core.errors import PromptArchivedError

        ref = check_prompt_ref(prompt, where)
        if ref is None:
            return None, None
        found = self.store.get_prompt_version(*ref)
        if found.archived:
            raise PromptArchivedError(found.prompt_id, found.version)
        return found.prompt_id, found.version

    def _add_model_blocks(
        self,
        user: str,
        kind: BlockKind,
        items: Sequence[tuple[str, str, tuple[tuple[str, str], ...]]],
        session_id: str,
        conversation_id: str,
        time: datetime | str | float | None,
        annotations: Mapping[str, str] | None,
        ttl_s: int | None,
        prompt: object,
        extract: ExtractMode | None,
        sync_timeout_s: float | None = None,
    ) -> AddResult:
        from memlane.core.memory import new_block_id

        # The synchronous extraction's time counts from here: the embedding and the write come out of it.
        started = monotonic()
        if sync_timeout_s is not None:
            sync_timeout_s = check_seconds(sync_timeout_s, "sync_timeout_s", 0, MAX_PERIOD_S)
        check_name(user, "user")
        check_name(session_id, "session_id")
        check_name(conversation_id, "conversation_id")
        mode = _extract_mode(extract)
        if mode == "sync" and self.llm is None:
            raise ConfigError("extract='sync' needs an LLM (Memory(..., llm=...) or --llm)")
        labels = check_annotations(annotations, "annotations") or {}
        ttl = check_ttl(ttl_s, "ttl_s")
        since = self.store.deletion_epoch()
        prompt_id, prompt_version = self._resolve_prompt(prompt)
        ingest = now_utc()
        given, time_of_day = coerce_time_of_day(time, where="time")
        event = given or ingest
        status = ExtractionStatus.OFF if mode == "off" else ExtractionStatus.QUEUED
        blocks = [
            MemoryBlock(
                id=new_block_id(),
                user=user,
                conversation_id=conversation_id,
                session_id=session_id,
                exchange_index=i,
                perspective=perspective,
                mode=PerspectiveMode.SINGLE,
                message=text,
                event_time=event,
                ingest_time=ingest,
                time_annotation=annotate(event, time_of_day=time_of_day),
                content_hash=content_hash(text),
                extraction_status=status,
                annotations=dict(labels),
                kind=kind,
                sides=sides,
                ttl_s=ttl,
                prompt_id=prompt_id,
                prompt_version=prompt_version,
            )
            for i, (perspective, text, sides) in enumerate(items)
        ]
        vectors, new_cache = self.embedder.embed_deferred([b.message for b in blocks])
        if self._shared_cache and new_cache:
            self.embedder.cache.put_vectors(self.embedder.model_id, new_cache)
            new_cache = {}
        job_ids = self.store.write_blocks(
            user,
            blocks,
            vectors,
            (self.embedder.model_id, new_cache),
            enqueue_attempts=0 if mode == "off" else self.max_attempts,
            epoch=since,
            default_ttl_s=self.default_ttl_s,
        )
        errors: builtins.list[LLMError] = []
        outcome: dict[int, JobStatus] = {}
        if mode == "sync":
            left = None if sync_timeout_s is None else max(0.0, sync_timeout_s - (monotonic() - started))
            outcome = self.run_jobs(job_ids, timeout_s=left, on_error=errors.append)
        done = sum(s is JobStatus.DONE for s in outcome.values())
        return AddResult(
            user=user,
            conversation_id=conversation_id,
            session_id=session_id,
            block_ids=tuple(b.id for b in blocks),
            exchanges=len(blocks),
            skipped_system_messages=0,
            jobs_enqueued=len(job_ids),
            jobs_done=done,
            jobs_failed=sum(s is JobStatus.DEAD for s in outcome.values()),
            extraction_error=str(errors[-1]) if errors and done < len(job_ids) else None,
        )

    # -- updates, TTL, status ----------------------------------------------------------------------------

    def update(
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
        """Change a block in place (same id), atomically: a FACT takes new ``content``, an EXCHANGE new
        ``sides`` (user_content, assistant_content). New text gets a new embedding, keyword statistics
        and term bags move from the old text to the new, its ANN entry is replaced, its summary and facts
        are cleared and its extraction is queued again (with ``extract=None``: if it had extraction;
        ``"off"``: not; ``"async"``: queued). ``annotations`` replace the block's; ``ttl_s`` resets its
        TTL from now; ``prompt`` (a registry prompt, or None for memlane's own) changes what extracts it
        and re-queues. SessionEndedError if the block's session has ended; NotFoundError if unknown or
        expired."""
        user = check_stored_name(user, "user")
        block_id = check_text(block_id, "block_id")
        if extract == "sync":
            raise ValidationError("an update queues extraction (off or async); a worker runs it", where="extract")
        mode = None if extract is None else _extract_mode(extract)
        labels = check_annotations(annotations, "annotations")
        ttl = check_ttl(ttl_s, "ttl_s")
        if content is not None and sides is not None:
            raise ValidationError("give content (a fact) or sides (an exchange), not both", where="content")
        block = self.store.get_block(user, block_id)
        text = block.message
        new_sides = block.sides
        if content is not None:
            if block.kind is not BlockKind.FACT:
                raise ValidationError("an exchange block takes sides, not content", where="content")
            if not isinstance(content, str) or not content.strip():
                raise ValidationError("must be non-empty text", where="content")
            text = check_text(content, "content")
        if sides is not None:
            if block.kind is not BlockKind.EXCHANGE:
                raise ValidationError("a fact block takes content, not sides", where="sides")
            u, a = _check_side_pair(sides, "sides")
            text = exchange_text(u, a)
            new_sides = ((USER_ROLE, u), (ASSISTANT_ROLE, a))
        prompt_id, prompt_version = block.prompt_id, block.prompt_version
        if prompt is not KEEP:
            prompt_id, prompt_version = self._resolve_prompt(prompt)
        changed = text != block.message
        steer = (prompt_id, prompt_version) != (block.prompt_id, block.prompt_version)
        had = block.extraction_status is not ExtractionStatus.OFF
        requeue = mode == "async" or (mode is None and had and (changed or steer))
        vectors = None
        if changed:
            # Not written to the embedding cache: a second commit would double an update's cost, and an
            # update's text is rarely seen again.
            vectors, _ = self.embedder.embed_deferred([text])
        status = block.extraction_status
        if changed and not requeue:
            status = ExtractionStatus.OFF
        updated = replace(
            block,
            message=text,
            content_hash=content_hash(text),
            sides=new_sides,
            summary=None if changed else block.summary,
            contexts=() if changed else block.contexts,
            extraction_prompt=None if changed else block.extraction_prompt,
            extraction_status=status,
            annotations=block.annotations if labels is None else labels,
            ttl_s=block.ttl_s if ttl is None else ttl,
            prompt_id=prompt_id,
            prompt_version=prompt_version,
        )
        stored = self.store.update_block(
            user,
            updated,
            vectors,
            reset_ttl=ttl is not None,
            default_ttl_s=self.default_ttl_s,
            enqueue_attempts=self.max_attempts if requeue else 0,
            now=_now(),
        )
        if changed:
            self._forget_calls([block])  # the old text's extraction calls
        return stored

    def set_ttl(
        self,
        user: str,
        ttl_s: int,
        *,
        session_id: str | None = None,
        block_ids: Sequence[str] | None = None,
    ) -> int:
        """Set the TTL of the user's live blocks (all of them, one session's, or the listed ones): they
        expire ``ttl_s`` seconds from now (0: never). Returns how many blocks changed."""
        user = check_stored_name(user, "user")
        ttl = check_ttl(ttl_s, "ttl_s")
        if ttl is None:
            raise ValidationError("a TTL is needed (0: never expires)", where="ttl_s")
        if session_id is not None and block_ids is not None:
            raise ValidationError("give session_id or block_ids, not both", where="block_ids")
        return self.store.set_ttl(
            user,
            ttl,
            session_id=None if session_id is None else check_stored_name(session_id, "session_id"),
            block_ids=check_ids(block_ids, "block_ids"),
            now=_now(),
        )

    def requeue_block(self, user: str, block_id: str) -> MemoryBlock:
        """Queue a failed block's extraction again (its status back to processing); ValidationError
        unless its extraction failed."""
        user = check_stored_name(user, "user")
        block_id = check_text(block_id, "block_id")
        return self.store.requeue_block(user, block_id, max_attempts=self.max_attempts, now=_now())

    # -- browse ------------------------------------------------------------------------------------------

    def browse(
        self,
        user: str,
        filters: Filters | None = None,
        *,
        order: str = "ingested",
        limit: int = 100,
        offset: int = 0,
        before: datetime | str | float | None = None,
        after: datetime | str | float | None = None,
    ) -> Page[MemoryBlock]:
        """Every live block of the user that passes ``filters`` and the event-time window, newest first
        by ingest time (``order="ingested"``) or event time (``"event"``), paged, with the total: the
        query-less search."""
        if order not in ("ingested", "event"):
            raise ValidationError(f"must be 'ingested' or 'event', not {order!r}", where="order")
        limit, offset = check_page(limit, offset)
        b, _ = coerce_time_of_day(before, where="before")
        a, _ = coerce_time_of_day(after, where="after")
        return self.store.browse_blocks(
            check_stored_name(user, "user"),
            check_filters(filters),
            order=order,
            limit=limit,
            offset=offset,
            after=None if a is None else to_epoch(a),
            before=None if b is None else to_epoch(b),
            now=_now(),
        )

    # -- prompts -----------------------------------------------------------------------------------------

    @property
    def prompts(self) -> PromptRegistry:
        """The registry of named extraction prompts (one per store)."""
        return PromptRegistry(self.store)


class PromptRegistry:
    """Named extraction prompts with immutable versions from 0 (:attr:`Memory.prompts`). A prompt's text is
    given to memlane's extraction as extra instructions: it steers what is remembered; the reply's shape
    (a summary and facts) stays memlane's."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def create(
        self, prompt_id: str, text: str, *, description: str = "", annotations: Mapping[str, str] | None = None
    ) -> Prompt:
        """Version 0 of a new prompt; AlreadyExistsError if the id is taken (archived ones too)."""
        return self.store.create_prompt(
            check_prompt_id(prompt_id),
            check_prompt_text(text),
            description=check_description(description),
            annotations=check_annotations(annotations, "annotations") or {},
            now=_now(),
        )

    def get(self, prompt_id: str) -> Prompt:
        return self.store.get_prompt(check_prompt_id(prompt_id))

    def version(self, prompt_id: str, version: int | None = None) -> PromptVersion:
        return self.store.get_prompt_version(check_prompt_id(prompt_id), check_version(version, "version"))

    def list(self, *, limit: int = 100, offset: int = 0, include_archived: bool = False) -> Page[Prompt]:
        limit, offset = check_page(limit, offset)
        return self.store.list_prompts(limit=limit, offset=offset, include_archived=bool(include_archived))

    def versions(self, prompt_id: str, *, limit: int = 100, offset: int = 0) -> Page[PromptVersion]:
        limit, offset = check_page(limit, offset)
        return self.store.list_prompt_versions(check_prompt_id(prompt_id), limit=limit, offset=offset)

    def update(
        self,
        prompt_id: str,
        *,
        text: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Prompt:
        """New text adds a version, which becomes current; description and annotations are replaced when
        given. PromptArchivedError for an archived prompt."""
        return self.store.update_prompt(
            check_prompt_id(prompt_id),
            text=None if text is None else check_prompt_text(text),
            description=None if description is None else check_description(description),
            annotations=check_annotations(annotations, "annotations"),
            now=_now(),
        )

    def archive(self, prompt_id: str, version: int | None = None) -> Prompt:
        """Archive one version, or the whole prompt (its id stays reserved)."""
        return self.store.archive_prompt(check_prompt_id(prompt_id), check_version(version, "version"), now=_now())

    def purge(self, prompt_id: str, version: int | None = None) -> int:
        """Delete one version (ConflictError for the current one of a prompt with others), or the whole
        prompt (the id is free again); returns how many versions went."""
        return self.store.purge_prompt(check_prompt_id(prompt_id), check_version(version, "version"))
