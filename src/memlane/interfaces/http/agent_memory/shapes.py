"""The answers of the Agent Memory routes, as pydantic models built from the core's values (that API's field
names): the OpenAPI document describes each answer as it is sent.

Times are ISO 8601 in UTC; optional fields without a value are left out rather than sent as null, so a
client's defaults apply (the routes answer with ``response_model_exclude_unset``: a field is sent when it
was given a value, ``None`` included, as a session's ``end_time``); a block's annotations are strings, its
status one of ``processing``, ``ready``, ``extraction_failed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from memlane.core.model import (
    BlockKind,
    BlockStatus,
    Hit,
    MemoryBlock,
    Page,
    Prompt,
    PromptVersion,
    Rejected,
    Session,
    UserInfo,
)

# What every route of these answers with: a field left unset is left out of the body.
ANSWER: dict[str, Any] = {"response_model_exclude_unset": True}


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


class PageFields(BaseModel):
    """A page's counts. A page's answer lists its items first and these after: a page model names its
    list in a class of its own and inherits ``(PageFields, ThatList)``, since pydantic orders fields from
    the last base to the first."""

    count: int = Field(description="How many items this answer holds.")
    total: int = Field(description="How many items match, on every page.")
    limit: int
    offset: int


def page_fields(page: Page[Any], count: int) -> dict[str, int]:
    return {"count": count, "total": page.total, "limit": page.limit, "offset": page.offset}


class UserOut(BaseModel):
    id: str
    name: str
    metadata: dict[str, Any]
    sessions: list[str] | None = Field(default=None, description="Its session ids, newest first (one user only).")


class UserList(BaseModel):
    users: list[UserOut]


class UserPage(PageFields, UserList):
    pass


def user_out(info: UserInfo, sessions: Sequence[str] | None = None) -> UserOut:
    """A user; ``sessions`` (its session ids) when the caller read them."""
    out = UserOut(id=info.name, name=info.display_name or info.name, metadata=dict(info.metadata))
    if sessions is not None:
        out.sessions = list(sessions)
    return out


class SessionOut(BaseModel):
    user_id: str
    session_id: str
    start_time: str
    end_time: str | None = Field(description="When it ended; null while it is open.")
    annotations: dict[str, str]
    metadata: dict[str, Any]
    blocks_ttl: int | None = Field(default=None, description="The default TTL of its blocks, in seconds (0: never).")


class SessionList(BaseModel):
    sessions: list[SessionOut]


class SessionPage(PageFields, SessionList):
    pass


def session_out(s: Session) -> SessionOut:
    out = SessionOut(
        user_id=s.user,
        session_id=s.session_id,
        start_time=iso(s.started_at),
        end_time=iso(s.ended_at) if s.ended_at is not None else None,
        annotations=dict(s.annotations),
        metadata=dict(s.metadata),
    )
    if s.default_ttl_s is not None:
        out.blocks_ttl = s.default_ttl_s
    return out


class ChatMessageOut(BaseModel):
    user_content: str
    assistant_content: str


class BlockOut(BaseModel):
    block_id: str
    user_id: str
    session_id: str
    ingested_at: str
    created_at: str = Field(description="The event time: when it was said.")
    fail_count: int
    annotations: dict[str, str]
    contexts: list[str] = Field(description="The facts extraction found in it.")
    status: BlockStatus
    fact: str | None = Field(default=None, description="A fact block's text.")
    message: ChatMessageOut | None = Field(default=None, description="An exchange block's two sides.")
    summary: str | None = None
    last_queued_at: str | None = None
    prompt_id: str | None = None
    prompt_vid: int | None = None
    rel_score: float | None = Field(default=None, description="A search hit's score (higher is better).")


def message_of(block: MemoryBlock) -> ChatMessageOut:
    """An exchange's two sides as given; a block written through memlane's own API (a message list)
    shows its text as the user's side."""
    user = next((c for r, c in block.sides if r == "user"), "")
    assistant = next((c for r, c in block.sides if r == "assistant"), "")
    if not (user.strip() or assistant.strip()):
        user = block.message
    return ChatMessageOut(user_content=user, assistant_content=assistant)


def block_out(block: MemoryBlock, rel_score: float | None = None) -> BlockOut:
    out = BlockOut(
        block_id=block.id,
        user_id=block.user,
        session_id=block.session_id,
        ingested_at=iso(block.ingest_time),
        created_at=iso(block.event_time),
        fail_count=block.fail_count,
        annotations=dict(block.annotations),
        contexts=list(block.contexts),
        status=BlockStatus(block.status),
    )
    if block.kind is BlockKind.FACT:
        out.fact = block.message
    else:
        out.message = message_of(block)
    if block.summary is not None:
        out.summary = block.summary
    if block.last_queued_at is not None:
        out.last_queued_at = iso(block.last_queued_at)
    if block.prompt_id is not None:
        out.prompt_id = block.prompt_id
        if block.prompt_version is not None:
            out.prompt_vid = block.prompt_version
    if rel_score is not None:
        out.rel_score = rel_score
    return out


def hit_out(hit: Hit) -> BlockOut:
    return block_out(hit.block, rel_score=round(float(hit.score), 6))


class BlockList(BaseModel):
    memory_blocks: list[BlockOut]


class BlocksFound(BlockList):
    count: int


class BlockPage(PageFields, BlockList):
    pass


class RejectedOut(BaseModel):
    input_index: int = Field(description="Its place in the list sent.")
    actual_tokens: int
    per_request_token_limit: int
    reason: Literal["token_limit_exceeded"]


def rejected_out(r: Rejected) -> RejectedOut:
    return RejectedOut(
        input_index=r.index, actual_tokens=r.tokens, per_request_token_limit=r.limit, reason="token_limit_exceeded"
    )


class AddedOut(BaseModel):
    message: str
    accepted_count: int
    block_ids: list[str] = Field(description="The stored blocks' ids, in input order.")
    rejected_count: int
    rejected_details: list[RejectedOut]


class UpdatedOut(BaseModel):
    message: str
    block: BlockOut


class DeletedOut(BaseModel):
    deleted_count: int
    failed_count: int
    failed_block_ids: list[str] = Field(description="Listed blocks of another session, left as they are.")


class TtlSetOut(BaseModel):
    message: str
    updated_count: int


class PromptOut(BaseModel):
    prompt_id: str
    prompt: str
    description: str
    current_vid: int
    version_count: int
    last_updated_at: str
    annotations: dict[str, str]
    archived: bool


class VersionOut(BaseModel):
    prompt_id: str
    vid: int
    prompt: str
    updated_at: str
    archived: bool
    is_current: bool


class PromptList(BaseModel):
    prompts: list[PromptOut]


class PromptPage(PageFields, PromptList):
    pass


class VersionList(BaseModel):
    versions: list[VersionOut]


class VersionPage(PageFields, VersionList):
    pass


def prompt_out(p: Prompt) -> PromptOut:
    return PromptOut(
        prompt_id=p.prompt_id,
        prompt=p.text,
        description=p.description,
        current_vid=p.current_version,
        version_count=p.version_count,
        last_updated_at=iso(p.updated_at),
        annotations=dict(p.annotations),
        archived=p.archived,
    )


def version_out(v: PromptVersion) -> VersionOut:
    return VersionOut(
        prompt_id=v.prompt_id,
        vid=v.version,
        prompt=v.text,
        updated_at=iso(v.created_at),
        archived=v.archived,
        is_current=v.is_current,
    )
