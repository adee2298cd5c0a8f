"""Sessions as first-class records: every route acts for the user of the caller's key."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from memlane.core.errors import NotFoundError
from memlane.interfaces.http.auth import UserKey
from memlane.interfaces.http.routes.common import SessionPath, api_router, create_route
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.model_schemas import (
    SessionDeleted,
    SessionEndIn,
    SessionIn,
    SessionOut,
    SessionPage,
    SessionUpdateIn,
    session_out,
    session_page,
)
from memlane.interfaces.wire.schemas import MAX_OFFSET, error_responses

router = api_router("sessions", prefix="/v1/sessions")


@router.post("", **create_route(SessionOut, "It existed (exist_ok)."))
def create_session(body: SessionIn, user: UserKey, request: Request, response: Response) -> SessionOut:
    """Start a session (201). 409 ``already_exists`` if the user has one by that id, unless ``exist_ok``
    (then 200 with the existing one, unchanged)."""
    memory = services(request).memory
    if body.exist_ok:
        try:
            existing = memory.get_session(user, body.session_id)
        except NotFoundError:
            existing = None
        if existing is not None:
            response.status_code = 200
            return session_out(existing)
    created = memory.create_session(
        user,
        body.session_id,
        conversation_id=body.conversation_id,
        started_at=body.started_at,
        annotations=body.annotations,
        metadata=body.metadata,
        default_ttl_s=body.default_ttl_s,
    )
    return session_out(created)


@router.get("", response_model=SessionPage)
def list_sessions(
    user: UserKey,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> SessionPage:
    """The user's sessions, the latest started first, a page at a time with the total."""
    return session_page(services(request).memory.list_sessions(user, limit=limit, offset=offset))


@router.get("/{session_id}", response_model=SessionOut)
def get_session(session_id: SessionPath, user: UserKey, request: Request) -> SessionOut:
    return session_out(services(request).memory.get_session(user, session_id))


@router.patch("/{session_id}", response_model=SessionOut, responses=error_responses(409))
def update_session(session_id: SessionPath, body: SessionUpdateIn, user: UserKey, request: Request) -> SessionOut:
    """Replace what is given (annotations, metadata, the default TTL of its new blocks). 409 once it has
    ended."""
    updated = services(request).memory.update_session(
        user, session_id, annotations=body.annotations, metadata=body.metadata, default_ttl_s=body.default_ttl_s
    )
    return session_out(updated)


@router.post("/{session_id}/end", response_model=SessionOut, responses=error_responses(409))
def end_session(
    session_id: SessionPath, user: UserKey, request: Request, body: SessionEndIn | None = None
) -> SessionOut:
    """End the session: its blocks stay readable and searchable, new writes and updates into it are
    refused (409 ``session_ended``). Ending it twice is 409 too."""
    at = body.at if body is not None else None
    return session_out(services(request).memory.end_session(user, session_id, at=at))


@router.delete("/{session_id}", response_model=SessionDeleted)
def delete_session(session_id: SessionPath, user: UserKey, request: Request) -> SessionDeleted:
    """Delete the session and its blocks, as completely as a deleted user's (vectors, keyword statistics,
    jobs, LLM calls)."""
    deleted = services(request).memory.delete_session(user, session_id)
    return SessionDeleted(user=user, session_id=session_id, blocks_deleted=deleted)
