"""Read-only routes for the console: who a key is, and one user's memory (blocks, sessions, search) read by
the admin or that user.

The memory routes (``/v1/memories``, ``/v1/search``) take the user from a user key, so the admin key, which
holds no memories, cannot read anyone's. An operator looking inside the service needs exactly that: these
routes name the user in the path and answer the admin, or that user's own key (any other key: 403, whether
the user exists or not). They only read: writes stay on the user-key routes.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from pydantic import BaseModel, Field

from memlane.interfaces.http.auth import AdminOrSelf, Caller
from memlane.interfaces.http.routes.common import BlockIdPath, SessionPath, UserPath, api_router
from memlane.interfaces.http.routes.memories import search_hits
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.model_schemas import BlockPage, SessionOut, SessionPage, session_out, session_page
from memlane.interfaces.wire.schemas import (
    MAX_OFFSET,
    MAX_TEXT,
    BlockOut,
    HitOut,
    SearchIn,
    block_out,
)

router = api_router("console", prefix="/v1")
MAX_PAGE = 1000


class WhoAmI(BaseModel):
    """The caller: the admin, or the user a key acts for."""

    admin: bool
    user: str | None = Field(description="The key's user; null for the admin key.")
    key_id: str | None = Field(description="The user key's id; null for the admin key.")


@router.get("/whoami", response_model=WhoAmI)
def whoami(caller: Caller) -> WhoAmI:
    """Who the key is: 401 for a missing, unknown or revoked key. Any key."""
    return WhoAmI(admin=caller.admin, user=caller.user, key_id=caller.key_id)


@router.get("/users/{user}/memories", response_model=BlockPage)
def user_memories(
    user: UserPath,
    _: AdminOrSelf,
    request: Request,
    conversation_id: Annotated[str | None, Query(max_length=MAX_TEXT)] = None,
    session_id: Annotated[str | None, Query(max_length=MAX_TEXT)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> BlockPage:
    """A page of the user's blocks in event-time order, with their total (an unknown user has none). Admin
    key, or the user's own."""
    memory = services(request).memory
    blocks = memory.list(user, conversation_id=conversation_id, session_id=session_id, limit=limit, offset=offset)
    total = memory.count(user, conversation_id=conversation_id, session_id=session_id)
    return BlockPage(items=[block_out(b) for b in blocks], total=total, limit=limit, offset=offset)


class PerspectiveOut(BaseModel):
    """Another block of the same exchange: the exchange as one of its other sides saw it."""

    block_id: str
    perspective: str
    summary: str | None = Field(description="What its extraction found (null until it has run).")
    status: str = Field(description="processing, ready or extraction_failed, as the block's own status.")


class UserBlockOut(BlockOut):
    """A block, as ``GET /v1/memories/{block_id}`` answers it, with the other perspectives of its exchange."""

    other_perspectives: list[PerspectiveOut] = Field(
        description="The same exchange's blocks from its other perspectives (dual and speakers modes store one "
        "block per perspective), by perspective; empty for a single-perspective block or a fact."
    )


@router.get("/users/{user}/memories/{block_id}", response_model=UserBlockOut)
def user_memory(user: UserPath, block_id: BlockIdPath, _: AdminOrSelf, request: Request) -> UserBlockOut:
    """One block of the user with the other perspectives of its exchange; 404 if it is not theirs. Admin
    key, or the user's own."""
    block, *others = services(request).memory.exchange(user, block_id)
    return UserBlockOut(
        **block_out(block).model_dump(),
        other_perspectives=[
            PerspectiveOut(block_id=o.id, perspective=o.perspective, summary=o.summary, status=o.status) for o in others
        ],
    )


@router.post("/users/{user}/search", response_model=list[HitOut])
def user_search(user: UserPath, body: SearchIn, _: AdminOrSelf, request: Request) -> list[HitOut]:
    """The user's top-k blocks for the query, exactly as ``POST /v1/search`` answers that user's key. Admin
    key, or the user's own."""
    return search_hits(request, user, body)


@router.get("/users/{user}/sessions", response_model=SessionPage)
def user_sessions(
    user: UserPath,
    _: AdminOrSelf,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> SessionPage:
    """The user's sessions, the latest started first, a page at a time with the total, as ``GET
    /v1/sessions`` answers that user's key. Admin key, or the user's own."""
    return session_page(services(request).memory.list_sessions(user, limit=limit, offset=offset))


@router.get("/users/{user}/sessions/{session_id}", response_model=SessionOut)
def user_session(user: UserPath, session_id: SessionPath, _: AdminOrSelf, request: Request) -> SessionOut:
    """One session of the user; 404 if they have none of that id. Admin key, or the user's own."""
    return session_out(services(request).memory.get_session(user, session_id))
