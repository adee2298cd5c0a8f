"""The memory model's services of :class:`memlane.core.memory.Memory` (docs/design/007-memory-model.md):
users with names and metadata (:class:`Users`), first-class sessions (:class:`Sessions`), blocks changed in
place, their TTLs and the query-less browse (:class:`Blocks`), and the extraction prompt registry
(:class:`PromptRegistry`). Facts and exchanges are added by the one add path, ``memlane.core.ingest``."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from memlane.core.embedding.protocol import CachedEmbedder
from memlane.core.errors import AlreadyExistsError, ValidationError
from memlane.core.ingest import DEFAULT_CONVERSATION, check_extract, check_side_pair, exchange_text, resolve_prompt
from memlane.core.model import (
    ASSISTANT_ROLE,
    USER_ROLE,
    BlockKind,
    ExtractionStatus,
    ExtractMode,
    Filters,
    MemoryBlock,
    Page,
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
    check_prompt_text,
    check_ttl,
    check_version,
)
from memlane.core.names import check_name, check_stored_name, check_text
from memlane.core.services import Settings
from memlane.core.store.blocks import BlockBrowse, BlockUpdate
from memlane.core.store.blocks import Blocks as StoredBlocks
from memlane.core.store.expiry import Expiry, TtlChange
from memlane.core.store.prompts import PromptChange, Prompts
from memlane.core.store.queue import Queue
from memlane.core.store.sessions import NewSession, SessionChanges
from memlane.core.store.sessions import Sessions as StoredSessions
from memlane.core.store.users import UserQuery
from memlane.core.store.users import Users as StoredUsers
from memlane.core.timefmt import coerce_time_of_day, now_utc, to_epoch

__all__ = ["KEEP", "Blocks", "PromptRegistry", "Sessions", "Users", "exchange_text"]


class _Keep:
    """The default of an argument that, omitted, leaves the stored value as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


class BlockRooms(StoredBlocks, Expiry, Queue, Prompts, Protocol):
    """What :class:`Blocks` reads and changes in the store: blocks, their TTLs, their extraction's queue and
    the prompts an update names."""


def _now() -> float:
    return to_epoch(now_utc())


class Users:
    """Users (namespaces) with a display name and metadata."""

    def __init__(self, store: StoredUsers) -> None:
        self.store = store

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
            UserQuery(
                name=wanted,
                metadata=check_metadata(metadata, "metadata"),
                limit=limit,
                offset=offset,
                contains=part or None,
                metadata_text=texts,
            )
        )


class Sessions:
    """Sessions of a user, first-class: created, read, changed, ended (deleted by the Eraser)."""

    def __init__(self, store: StoredSessions) -> None:
        self.store = store

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
        new = NewSession(
            session_id,
            conversation_id,
            now if start is None else to_epoch(start),
            annotations=check_annotations(annotations, "annotations") or {},
            metadata=check_metadata(metadata, "metadata") or {},
            default_ttl_s=check_ttl(default_ttl_s, "default_ttl_s"),
        )
        return self.store.create_session(user, new, exist_ok=exist_ok, now=now)

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
        changes = SessionChanges(
            annotations=check_annotations(annotations, "annotations"),
            metadata=check_metadata(metadata, "metadata"),
            default_ttl_s=check_ttl(default_ttl_s, "default_ttl_s"),
        )
        return self.store.update_session(
            check_stored_name(user, "user"), check_stored_name(session_id, "session_id"), changes, now=_now()
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


class Blocks:
    """A user's blocks as the memory model reads and changes them: an exchange's perspectives, updates in
    place, TTLs, requeuing a failed extraction, the query-less browse. ``forget`` deletes the LLM calls of
    replaced text (:meth:`memlane.core.erase.Eraser.forget`)."""

    def __init__(
        self,
        store: BlockRooms,
        embedder: CachedEmbedder,
        settings: Settings,
        forget: Callable[[Sequence[MemoryBlock]], int],
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.forget = forget

    def exchange(self, user: str, block_id: str) -> builtins.list[MemoryBlock]:
        """The block and the other perspectives of its exchange (``dual`` and ``speakers`` modes store one
        block per perspective): the block first, then the others by perspective. NotFoundError if the block
        does not exist or belongs to someone else."""
        return self.store.exchange_blocks(check_stored_name(user, "user"), check_text(block_id, "block_id"))

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
        mode = None if extract is None else check_extract(extract, self.settings.llm)
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
            u, a = check_side_pair(sides, "sides")
            text = exchange_text(u, a)
            new_sides = ((USER_ROLE, u), (ASSISTANT_ROLE, a))
        prompt_id, prompt_version = block.prompt_id, block.prompt_version
        if prompt is not KEEP:
            prompt_id, prompt_version = resolve_prompt(self.store, prompt)
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
        how = BlockUpdate(
            reset_ttl=ttl is not None,
            default_ttl_s=self.settings.default_ttl_s,
            enqueue_attempts=self.settings.max_attempts if requeue else 0,
        )
        stored = self.store.update_block(user, updated, vectors, how, now=_now())
        if changed:
            self.forget([block])  # the old text's extraction calls
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
            TtlChange(
                ttl,
                now=_now(),
                session_id=None if session_id is None else check_stored_name(session_id, "session_id"),
                block_ids=check_ids(block_ids, "block_ids"),
            ),
        )

    def requeue_block(self, user: str, block_id: str) -> MemoryBlock:
        """Queue a failed block's extraction again (its status back to processing); ValidationError
        unless its extraction failed."""
        user = check_stored_name(user, "user")
        block_id = check_text(block_id, "block_id")
        return self.store.requeue_block(user, block_id, max_attempts=self.settings.max_attempts, now=_now())

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
        limit, offset = check_page(limit, offset)
        b, _ = coerce_time_of_day(before, where="before")
        a, _ = coerce_time_of_day(after, where="after")
        browse = BlockBrowse(
            check_filters(filters),
            order,
            limit,
            offset,
            after=None if a is None else to_epoch(a),
            before=None if b is None else to_epoch(b),
        )
        return self.store.browse_blocks(check_stored_name(user, "user"), browse, now=_now())


class PromptRegistry:
    """Named extraction prompts with immutable versions from 0 (:attr:`Memory.prompts`). A prompt's text is
    given to memlane's extraction as extra instructions: it steers what is remembered; the reply's shape
    (a summary and facts) stays memlane's."""

    def __init__(self, store: Prompts) -> None:
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
            PromptChange(
                text=None if text is None else check_prompt_text(text),
                description=None if description is None else check_description(description),
                annotations=check_annotations(annotations, "annotations"),
                now=_now(),
            ),
        )

    def archive(self, prompt_id: str, version: int | None = None) -> Prompt:
        """Archive one version, or the whole prompt (its id stays reserved)."""
        return self.store.archive_prompt(check_prompt_id(prompt_id), check_version(version, "version"), now=_now())

    def purge(self, prompt_id: str, version: int | None = None) -> int:
        """Delete one version (ConflictError for the current one of a prompt with others), or the whole
        prompt (the id is free again); returns how many versions went."""
        return self.store.purge_prompt(check_prompt_id(prompt_id), check_version(version, "version"))
