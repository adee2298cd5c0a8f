"""The vocabulary of memlane as small typed values.

A *user* (namespace) owns memories. A *conversation* is split into *sessions*; a session is a run of
*messages*. An *exchange* is a message and the reply that follows it. A *memory block* is what is stored
and searched: one per exchange and perspective.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")


class PerspectiveMode(StrEnum):
    """How an exchange becomes blocks."""

    DUAL = "dual"  # one block from the user's point of view, one from the assistant's
    SPEAKERS = "speakers"  # one block per speaker of a two-person chat
    SINGLE = "single"  # one block per exchange


class ExtractionStatus(StrEnum):
    """Where a block stands with its LLM extraction (summary and facts)."""

    OFF = "off"  # no extraction was asked for
    QUEUED = "queued"
    DONE = "done"
    FAILED = "failed"  # the job ended dead; the raw block stays searchable


class BlockKind(StrEnum):
    """What a block holds: an exchange (a message and its reply) or one standalone fact."""

    EXCHANGE = "exchange"
    FACT = "fact"


class BlockStatus(StrEnum):
    """A block as the Agent Memory model reports it (from its extraction status)."""

    PROCESSING = "processing"  # extraction is queued or running
    READY = "ready"  # nothing to wait for: extracted, or no extraction asked
    EXTRACTION_FAILED = "extraction_failed"  # the extraction job died; :meth:`Memory.requeue_block` retries it


class SearchMode(StrEnum):
    """Retrievers a search can use."""

    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


ExtractMode = Literal["off", "async", "sync"]

USER_ROLE = "user"
ASSISTANT_ROLE = "assistant"
SYSTEM_ROLE = "system"


@dataclass(frozen=True, slots=True)
class Message:
    """One message as given to :meth:`Memory.add`.

    ``role`` is ``user``/``assistant``/``system`` in dual and single mode, or a speaker's name in speakers
    mode. ``id`` is the caller's own message id (a LoCoMo ``dia_id``, say), kept on the blocks it lands in.
    """

    role: str
    content: str
    time: datetime | None = None
    id: str | None = None
    time_of_day: bool = True  # False: ``time`` was given as a date alone (annotated as the date)


@dataclass(frozen=True, slots=True)
class Turn:
    """Consecutive messages of one role, merged: the unit exchanges are built from."""

    role: str
    content: str
    time: datetime | None
    message_ids: tuple[str, ...]
    time_of_day: bool = True


@dataclass(frozen=True, slots=True)
class Exchange:
    """A turn and the reply that follows it (``reply`` is ``None`` for a turn nobody answered)."""

    index: int
    first: Turn
    reply: Turn | None

    def text(self) -> str:
        """The raw exchange as ``role: content`` lines."""
        lines = [f"{self.first.role}: {self.first.content}"]
        if self.reply is not None:
            lines.append(f"{self.reply.role}: {self.reply.content}")
        return "\n".join(lines)

    @property
    def speakers(self) -> tuple[str, ...]:
        return (self.first.role,) if self.reply is None else (self.first.role, self.reply.role)

    @property
    def message_ids(self) -> tuple[str, ...]:
        return self.first.message_ids + (self.reply.message_ids if self.reply else ())


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """What is stored and searched.

    ``message`` is the raw exchange text; ``summary`` and ``contexts`` (discrete facts) are written later by
    the LLM extraction. ``event_time`` is when it was said, ``ingest_time`` when memlane stored it, and
    ``time_annotation`` the event time as people read it.
    """

    id: str
    user: str
    conversation_id: str
    session_id: str
    exchange_index: int
    perspective: str
    mode: PerspectiveMode
    message: str
    event_time: datetime
    ingest_time: datetime
    time_annotation: str
    content_hash: str
    message_ids: tuple[str, ...] = ()
    summary: str | None = None
    contexts: tuple[str, ...] = ()
    extraction_status: ExtractionStatus = ExtractionStatus.OFF
    extraction_prompt: str | None = None  # "<prompt id>@<sha256>" of the prompt that wrote summary/contexts
    annotations: dict[str, str] = field(default_factory=dict)
    # The memory model (docs/design/007-memory-model.md): what the block is; an exchange's (role, content)
    # sides as given (empty for a fact, and for blocks made from a message list); the block's own TTL in
    # seconds as given (None: its session's default, else the server's; 0: never) and the expiry it gave at
    # the last write (None: never); when it was last updated in place; the registry prompt (id, version)
    # that extracts it; how many of its extraction attempts failed (an LLM outage's tries are not counted)
    # and when it was last queued.
    kind: BlockKind = BlockKind.EXCHANGE
    sides: tuple[tuple[str, str], ...] = ()
    ttl_s: int | None = None
    expires_at: datetime | None = None
    updated_at: datetime | None = None
    prompt_id: str | None = None
    prompt_version: int | None = None
    fail_count: int = 0
    last_queued_at: datetime | None = None

    @property
    def status(self) -> str:
        """``processing`` while extraction is queued, ``extraction_failed`` if it failed, else ``ready``."""
        if self.extraction_status is ExtractionStatus.QUEUED:
            return BlockStatus.PROCESSING.value
        if self.extraction_status is ExtractionStatus.FAILED:
            return BlockStatus.EXTRACTION_FAILED.value
        return BlockStatus.READY.value

    @property
    def exchange_key(self) -> tuple[str, str, int, datetime, str]:
        """What the blocks of one exchange (its perspectives) share and two exchanges never do: its place
        (conversation, session, index: indexes continue across adds to a session) and the add that wrote
        it (its ingest time), which also tells apart exchanges of stores written when every add numbered
        its exchanges from 0; and its text."""
        return (self.conversation_id, self.session_id, self.exchange_index, self.ingest_time, self.content_hash)


@dataclass(frozen=True, slots=True)
class RetrieverPart:
    """One retriever's share in a hit's score: its 1-based ``rank`` among the retriever's candidates, its
    own ``score`` (cosine for ``vector``, BM25 for ``keyword``) and ``margin``, what it added to the fused
    score: the score itself for a lone retriever, the weighted margin above the retriever's floor under
    score fusion, or the weighted RRF term ``weight / (rrf_k + rank)``."""

    retriever: str
    rank: int
    score: float
    margin: float


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a hit ranked where it did (:meth:`memlane.core.memory.Memory.search` with ``explain``).

    ``retrievers``: each retriever that found the block, with its rank, score and margin; ``fused``: their
    sum, the score before context. The context gains (0 where off or not earned): ``session_gain`` from the
    best candidates of the block's session, ``neighbour_gain`` from its neighbouring exchanges,
    ``words_gain`` from its session's rank by people's words, ``time_gain`` when its event time lies in a
    window of the query's time phrases, those phrases in ``time_phrases``. The hit's score is ``fused``
    plus the gains. ``supersedes``: ids of older blocks this one restates, which it was moved just above
    (:mod:`memlane.core.retrieval.supersession`)."""

    retrievers: tuple[RetrieverPart, ...]
    fused: float
    session_gain: float = 0.0
    neighbour_gain: float = 0.0
    words_gain: float = 0.0
    time_gain: float = 0.0
    time_phrases: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the block, its score and each retriever's 1-based rank.

    ``score_kind`` says what the score is (see :func:`memlane.core.retrieval.score_kind`): ``cosine`` (-1 to 1)
    or ``bm25`` (0 and up) for a single retriever, ``fusion`` or ``rrf`` for a fused hybrid score, which
    orders the hits of one search and means nothing across searches. ``other_perspectives`` holds the ids of
    the same exchange's blocks from the other perspectives (``dual``, ``speakers``) that also matched and were
    folded into this hit. ``superseded_by`` holds the ids of newer blocks among the search's candidates that
    restate what this one says (newest first; :mod:`memlane.core.retrieval.supersession`): a hint that this
    may be outdated, never a deletion. ``supersedes`` is the other side: the ids of the older blocks this one
    restates and was moved just above, which is why it can rank above a hit of a higher score (empty when it
    was not moved). ``explanation`` says why it ranked, when the search was asked to."""

    block: MemoryBlock
    score: float
    ranks: dict[str, int]
    score_kind: str = "fusion"
    other_perspectives: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()
    explanation: Explanation | None = None
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Rejected:
    """An item of an add left out because it is over the per-block token limit (``max_tokens``): its index
    in the list given, its estimated tokens (about four bytes of UTF-8 each) and the limit."""

    index: int
    tokens: int
    limit: int


@dataclass(frozen=True, slots=True)
class AddResult:
    """What :meth:`Memory.add` stored."""

    user: str
    conversation_id: str
    session_id: str
    block_ids: tuple[str, ...]
    exchanges: int
    skipped_system_messages: int
    jobs_enqueued: int = 0
    # Synchronous extraction only: how its jobs ended (a failed job is dead; its block is kept, unextracted),
    # and the last LLM error it met when a job did not end done.
    jobs_done: int = 0
    jobs_failed: int = 0
    extraction_error: str | None = None
    # The items left out for being over ``max_tokens`` (facts and exchanges only), in input order.
    rejected: tuple[Rejected, ...] = ()


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A namespace and how much it holds."""

    name: str
    blocks: int
    created_at: datetime
    display_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    sessions: int = 0
    last_activity: datetime | None = None  # the ingest time of the user's newest block


@dataclass(frozen=True, slots=True)
class Session:
    """A first-class session of a user: a run of blocks with its own clock, labels and default TTL.

    ``session_id`` is unique per user; ``conversation_id`` is the conversation it belongs to. An ended
    session (``ended_at`` set) keeps its blocks readable and searchable and refuses new writes and updates.
    ``default_ttl_s`` is the TTL of its blocks that give none (None: the server's default). ``blocks``
    counts its live (unexpired) blocks."""

    user: str
    session_id: str
    conversation_id: str
    started_at: datetime
    ended_at: datetime | None
    annotations: dict[str, str]
    metadata: dict[str, Any]
    default_ttl_s: int | None
    created_at: datetime
    blocks: int = 0

    @property
    def ended(self) -> bool:
        return self.ended_at is not None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing: its items, how many match in all, and the page asked for."""

    items: list[T]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True, slots=True)
class Filters:
    """Which blocks a search or a browse may return (every given rule must hold; none: all).

    ``sessions``: only these session ids (None: all of the user's sessions); ``block_ids``: only these
    blocks; ``annotations``: every pair must be on the block exactly, checked before the top-k cut (the
    default) or, with ``annotations_after_cut``, on the top k after it (fewer than k may remain);
    ``kinds``: only these block kinds; ``ingested_after``/``ingested_before``: the ingest time in
    [after, before); ``prompt_id`` (and ``prompt_version``, which needs it): only blocks extracted by that
    registry prompt. The event-time window stays the ``after``/``before`` arguments of search."""

    sessions: tuple[str, ...] | None = None
    block_ids: tuple[str, ...] | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    annotations_after_cut: bool = False
    kinds: frozenset[BlockKind] | None = None
    ingested_after: datetime | None = None
    ingested_before: datetime | None = None
    prompt_id: str | None = None
    prompt_version: int | None = None

    @property
    def empty(self) -> bool:
        """No rule at all: a search with these filters is the unfiltered search."""
        return (
            self.sessions is None
            and self.block_ids is None
            and not self.annotations
            and self.kinds is None
            and self.ingested_after is None
            and self.ingested_before is None
            and self.prompt_id is None
        )

    @property
    def pre(self) -> Filters:
        """The rules applied before the top-k cut (all of them, less post-cut annotations)."""
        return Filters(
            sessions=self.sessions,
            block_ids=self.block_ids,
            annotations={} if self.annotations_after_cut else dict(self.annotations),
            kinds=self.kinds,
            ingested_after=self.ingested_after,
            ingested_before=self.ingested_before,
            prompt_id=self.prompt_id,
            prompt_version=self.prompt_version,
        )

    def admits(self, block: MemoryBlock) -> bool:
        """Whether ``block`` passes every rule (annotations included, wherever they apply)."""
        if self.sessions is not None and block.session_id not in self.sessions:
            return False
        if self.block_ids is not None and block.id not in self.block_ids:
            return False
        if any(block.annotations.get(k) != v for k, v in self.annotations.items()):
            return False
        if self.kinds is not None and block.kind not in self.kinds:
            return False
        if self.ingested_after is not None and block.ingest_time < self.ingested_after:
            return False
        if self.ingested_before is not None and block.ingest_time >= self.ingested_before:
            return False
        if self.prompt_id is not None and block.prompt_id != self.prompt_id:
            return False
        return self.prompt_version is None or block.prompt_version == self.prompt_version


@dataclass(frozen=True, slots=True)
class Prompt:
    """A named extraction prompt of the registry, as its head: the current version's text and its labels.

    Versions are immutable and numbered from 0; an update with new text adds a version, which becomes
    current. An archived prompt keeps its id reserved and can no longer be used or updated."""

    prompt_id: str
    description: str
    annotations: dict[str, str]
    archived: bool
    current_version: int
    version_count: int
    updated_at: datetime
    text: str
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PromptVersion:
    """One immutable version of a registry prompt."""

    prompt_id: str
    version: int
    text: str
    created_at: datetime
    archived: bool
    is_current: bool


@dataclass(frozen=True, slots=True)
class DeletedUser:
    """What deleting a user removed: their blocks and their API keys (everything else goes with them)."""

    blocks: int
    keys: int


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """An API key of a user, without its secret."""

    key_id: str
    user: str
    label: str
    created_at: float  # epoch seconds
    role: str = "read-write"  # read-only | read-write | admin (memlane.core.apikeys.ROLES)


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A key as the store keeps it: the record, the SHA-256 of its secret, and the store's deletion epoch
    read in the same snapshot as the key (what an add authorised by this key checks its write against)."""

    record: KeyRecord
    secret_sha256: str
    epoch: int


def content_hash(text: str) -> str:
    """sha256 hex of the UTF-8 text: the key of the embedding cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
