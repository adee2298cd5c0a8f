"""Request bodies of the Agent Memory routes: that API's field names, memlane's checks.

Unknown fields are ignored (its clients send filter defaults a server may not know, and plain dicts
unvalidated), but a known field of the wrong type is refused: no coercion of ``"3"`` into 3 or of ``true``
into 1. What a value means (a name, a time, an annotation key, a TTL) is checked by the core, whose
ValidationError names the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memlane.core.bounds import MAX_OFFSET as MAX_OFFSET  # the routes' offsets, bounded as the core bounds them

# The bounds that API's clients enforce on what a server echoes: an answer never carries a larger limit.
MAX_USERS_LIMIT = 500
MAX_SESSIONS_LIMIT = 500
MAX_MEMORY_LIMIT = 200
MAX_PROMPTS_LIMIT = 1000
# Query-less searches return every match; this many at most (the answer says when more matched).
MAX_BROWSE = 10_000
MAX_ITEMS = 1000

NonNegative = Annotated[int, Field(ge=0)]


class Tolerant(BaseModel):
    """Unknown fields ignored; known ones of exactly their type."""

    model_config = ConfigDict(extra="ignore", strict=True)


class AgentUserIn(Tolerant):
    user_id: str
    name: str
    metadata: dict[str, Any] | None = None


class AgentUserUpdateIn(Tolerant):
    name: str | None = None
    metadata: dict[str, Any] | None = None


class AgentTtlIn(Tolerant):
    new_ttl: NonNegative
    session_id: str | None = None
    block_ids: list[str] | None = Field(default=None, max_length=MAX_ITEMS)


class AgentSessionIn(Tolerant):
    session_id: str
    annotations: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    memory_blocks_ttl: NonNegative | None = None


class AgentSessionUpdateIn(Tolerant):
    annotations: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None


class ChatMessageIn(Tolerant):
    user_content: str = ""
    assistant_content: str = ""


class AgentAddIn(Tolerant):
    messages: list[ChatMessageIn] | None = Field(default=None, max_length=MAX_ITEMS)
    facts: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    annotations: dict[str, str] | None = None
    async_processing: bool = True
    memory_block_ttl: NonNegative | None = None
    context_required: bool | None = None
    created_at: str | None = None
    prompt_id: str | None = None
    prompt_vid: NonNegative | None = None


class AgentUpdateIn(Tolerant):
    message: ChatMessageIn | None = None
    fact: str | None = None
    annotations: dict[str, str] | None = None
    memory_block_ttl: NonNegative | None = None
    async_processing: bool = True
    context_required: bool | None = None
    prompt_id: str | None = None
    prompt_vid: NonNegative | None = None


class DeleteIn(Tolerant):
    block_ids: list[str] | Literal["all"] | str = Field(max_length=MAX_ITEMS)


class FiltersIn(Tolerant):
    session_ids: list[str] | str | None = Field(default=None, max_length=MAX_ITEMS)
    block_ids: list[str] | None = Field(default=None, max_length=MAX_ITEMS)
    relevant_k: int = Field(default=10, ge=1, le=1000)
    annotations: dict[str, str] | None = None
    annotation_filter_mode: Literal["pre", "post"] = "pre"
    start_time: str | None = None
    end_time: str | None = None
    created_start_time: str | None = None
    created_end_time: str | None = None
    order_by: Literal["ingested_at", "created_at"] = "ingested_at"
    prompt_id: str | None = None
    prompt_vid: NonNegative | None = None


class AgentSearchIn(Tolerant):
    query: str | None = None
    filters: FiltersIn | None = None


class AgentPromptIn(Tolerant):
    prompt_id: str
    prompt: str
    description: str
    annotations: dict[str, str] | None = None


class AgentPromptUpdateIn(Tolerant):
    prompt: str | None = None
    description: str | None = None
    annotations: dict[str, str] | None = None
