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
from typing import Literal


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

    @property
    def exchange_key(self) -> tuple[str, str, int, datetime, str]:
        """What the blocks of one exchange (its perspectives) share and two exchanges never do: its place
        (conversation, session, index: indexes continue across adds to a session) and the add that wrote
        it (its ingest time), which also tells apart exchanges of stores written when every add numbered
        its exchanges from 0; and its text."""
        return (self.conversation_id, self.session_id, self.exchange_index, self.ingest_time, self.content_hash)


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the block, its score and each retriever's 1-based rank.

    ``score_kind`` says what the score is (see :func:`memlane.core.retrieval.score_kind`): ``cosine`` (-1 to 1)
    or ``bm25`` (0 and up) for a single retriever, ``fusion`` or ``rrf`` for a fused hybrid score, which
    orders the hits of one search and means nothing across searches. ``other_perspectives`` holds the ids of
    the same exchange's blocks from the other perspectives (``dual``, ``speakers``) that also matched and were
    folded into this hit. ``superseded_by`` holds the ids of newer blocks among the search's candidates that
    restate what this one says (newest first; :mod:`memlane.core.retrieval.supersession`): a hint that this
    may be outdated, never a deletion."""

    block: MemoryBlock
    score: float
    ranks: dict[str, int]
    score_kind: str = "fusion"
    other_perspectives: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()


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
    # Synchronous extraction only: how its jobs ended (a failed job is dead; its block is kept, unextracted).
    jobs_done: int = 0
    jobs_failed: int = 0


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A namespace and how much it holds."""

    name: str
    blocks: int
    created_at: datetime


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
