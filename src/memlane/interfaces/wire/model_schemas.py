"""Request and response bodies of the memory model on HTTP /v1 (and the MCP tools' results): users with a
display name and metadata, sessions, facts and two-sided exchanges, updates in place, TTLs, filtered search
and browse, block status, the prompt registry. The shapes of the responses are those of
:mod:`memlane.interfaces.wire.shapes`, which ``memlane ... --json`` prints too."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from memlane.core.bounds import MAX_VERSION
from memlane.core.model import MemoryBlock, Page, Prompt, PromptVersion, Session, UserInfo
from memlane.interfaces.wire.schemas import (
    MAX_DESCRIPTION,
    MAX_IDS,
    MAX_OFFSET,
    MAX_TEXT,
    Annotations,
    BlockId,
    BlockOut,
    FilterFields,
    Name,
    PromptId,
    PromptRef,
    Strict,
    TimeValue,
    TtlSeconds,
)
from memlane.interfaces.wire.shapes import prompt_json, prompt_version_json, session_json, user_json

Metadata = Annotated[dict[str, Any], Field(description="Any JSON object.", examples=[{"team": "blue"}])]
Extract = Literal["off", "async", "sync"]


def prompt_pair(ref: PromptRef | None) -> tuple[str, int | None] | None:
    return None if ref is None else ref.pair()


# -- users -------------------------------------------------------------------------------------------------


class UserUpdateIn(Strict):
    """What is given is replaced; what is left out is kept (a null display name clears it)."""

    display_name: str | None = Field(default=None, max_length=MAX_TEXT)
    metadata: Metadata | None = None


class UserInfoOut(BaseModel):
    user: str
    blocks: int
    created_at: str
    display_name: str | None
    metadata: dict[str, Any]
    sessions: int
    last_activity: str | None = Field(description="When the user's newest block was written (null: none).")


def user_info_out(u: UserInfo) -> UserInfoOut:
    return UserInfoOut.model_validate(user_json(u))


# -- sessions ----------------------------------------------------------------------------------------------


class SessionIn(Strict):
    session_id: Name
    conversation_id: Name = "default"
    started_at: TimeValue | None = Field(default=None, description="Default: now.")
    annotations: Annotations | None = None
    metadata: Metadata | None = None
    default_ttl_s: TtlSeconds | None = Field(
        default=None, description="The TTL of its blocks that give none (null: the server's default)."
    )
    exist_ok: bool = Field(default=False, description="Answer the existing session instead of 409.")


class SessionUpdateIn(Strict):
    """What is given is replaced; what is left out is kept."""

    annotations: Annotations | None = None
    metadata: Metadata | None = None
    default_ttl_s: TtlSeconds | None = None


class SessionEndIn(Strict):
    at: TimeValue | None = Field(default=None, description="When it ended; default: now.")


class SessionOut(BaseModel):
    user: str
    session_id: str
    conversation_id: str
    started_at: str
    ended_at: str | None
    ended: bool
    annotations: dict[str, str]
    metadata: dict[str, Any]
    default_ttl_s: int | None
    created_at: str
    blocks: int = Field(description="Its live (unexpired) blocks.")


class SessionPage(BaseModel):
    items: list[SessionOut]
    total: int
    limit: int
    offset: int


class SessionDeleted(BaseModel):
    user: str
    session_id: str
    blocks_deleted: int


def session_out(s: Session) -> SessionOut:
    return SessionOut.model_validate(session_json(s))


def session_page(page: Page[Session]) -> SessionPage:
    return SessionPage(
        items=[session_out(s) for s in page.items], total=page.total, limit=page.limit, offset=page.offset
    )


# -- blocks ------------------------------------------------------------------------------------------------


class WriteOptions(Strict):
    """What every write of blocks takes beside its content."""

    conversation_id: Name = "default"
    session_id: Name = "default"
    time: TimeValue | None = Field(default=None, description="The event time; default: now.")
    annotations: Annotations | None = None
    ttl_s: TtlSeconds | None = Field(default=None, description="Default: the session's, else the server's.")
    prompt: PromptRef | None = Field(default=None, description="The registry prompt to extract with.")
    extract: Extract = Field(
        default="off", description="LLM extraction: off, async (queued for the workers) or sync (before replying)."
    )


class FactsIn(WriteOptions):
    facts: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1, max_length=MAX_IDS)


class ExchangeIn(Strict):
    """One exchange as its two sides; either may be empty, not both."""

    user_content: str = ""
    assistant_content: str = ""


class ExchangesIn(WriteOptions):
    exchanges: list[ExchangeIn] = Field(min_length=1, max_length=MAX_IDS)


class UpdateIn(Strict):
    """A fact takes ``content``; an exchange takes ``user_content`` and/or ``assistant_content`` (a side left
    out keeps its text). ``annotations`` replace the block's; ``ttl_s`` restarts its clock from now."""

    content: str | None = Field(default=None, min_length=1)
    user_content: str | None = None
    assistant_content: str | None = None
    annotations: Annotations | None = None
    ttl_s: TtlSeconds | None = None
    prompt: PromptRef | None = Field(
        default=None, description="The registry prompt to extract with; null: memlane's own; left out: kept."
    )
    extract: Literal["off", "async"] | None = Field(
        default=None, description="Extraction of the new content, queued for the workers; default: as before."
    )

    @model_validator(mode="after")
    def _one_content(self) -> UpdateIn:
        if self.content is not None and (self.user_content is not None or self.assistant_content is not None):
            raise ValueError("content is a fact's; user_content and assistant_content an exchange's: not both")
        return self


class TtlIn(Strict):
    """A new TTL for the user's blocks: all of them, one session's, or the listed ones."""

    ttl_s: TtlSeconds
    session_id: Name | None = None
    block_ids: list[BlockId] | None = Field(default=None, min_length=1, max_length=MAX_IDS)

    @model_validator(mode="after")
    def _one_scope(self) -> TtlIn:
        if self.session_id is not None and self.block_ids is not None:
            raise ValueError("session_id or block_ids, not both")
        return self


class TtlOut(BaseModel):
    changed: int = Field(description="How many blocks got the new TTL.")


class BlockStatusOut(BaseModel):
    block_id: str
    status: Literal["processing", "ready", "extraction_failed"]
    extraction_status: str
    fail_count: int
    last_queued_at: str | None


def block_status_out(b: MemoryBlock) -> BlockStatusOut:
    return BlockStatusOut(
        block_id=b.id,
        status=b.status,  # type: ignore[arg-type]  # one of BlockStatus's values
        extraction_status=b.extraction_status.value,
        fail_count=b.fail_count,
        last_queued_at=None if b.last_queued_at is None else b.last_queued_at.isoformat(),
    )


class BrowseIn(FilterFields):
    """The query-less search: every matching block, newest first, a page at a time."""

    order: Literal["ingested", "event"] = Field(default="ingested", description="By write time or by event time.")
    before: TimeValue | None = Field(default=None, description="Only blocks whose event time is before this.")
    after: TimeValue | None = Field(default=None, description="Only blocks whose event time is at or after this.")
    limit: int = Field(default=100, ge=1, le=10_000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


class BlockPage(BaseModel):
    items: list[BlockOut]
    total: int
    limit: int
    offset: int


# -- prompts -----------------------------------------------------------------------------------------------


class PromptIn(Strict):
    prompt_id: PromptId
    text: str = Field(min_length=1, description="Extra instructions for memlane's extraction prompt.")
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    annotations: Annotations | None = None


class PromptUpdateIn(Strict):
    """New text adds a version, which becomes current; the description and annotations are the head's."""

    text: str | None = Field(default=None, min_length=1)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)
    annotations: Annotations | None = None


class PromptVersionIn(Strict):
    version: int | None = Field(default=None, ge=0, le=MAX_VERSION, description="One version; null: the whole prompt.")


class PromptOut(BaseModel):
    prompt_id: str
    description: str
    annotations: dict[str, str]
    archived: bool
    current_version: int
    version_count: int
    updated_at: str
    created_at: str | None
    text: str = Field(description="The current version's text.")


class PromptVersionOut(BaseModel):
    prompt_id: str
    version: int
    text: str
    created_at: str
    archived: bool
    is_current: bool


class PromptPage(BaseModel):
    items: list[PromptOut]
    total: int
    limit: int
    offset: int


class PromptVersionPage(BaseModel):
    items: list[PromptVersionOut]
    total: int
    limit: int
    offset: int


def prompt_out(p: Prompt) -> PromptOut:
    return PromptOut.model_validate(prompt_json(p))


def prompt_version_out(v: PromptVersion) -> PromptVersionOut:
    return PromptVersionOut.model_validate(prompt_version_json(v))
