"""Sessions (6 routes): create, list, get, update, delete, end."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from memlane.interfaces.http.agent_memory.auth import check_id, for_user
from memlane.interfaces.http.agent_memory.errors import ApiError, FlatErrorRoute, api_fields, renamed
from memlane.interfaces.http.agent_memory.schemas import (
    MAX_OFFSET,
    MAX_SESSIONS_LIMIT,
    AgentSessionIn,
    AgentSessionUpdateIn,
)
from memlane.interfaces.http.agent_memory.shapes import ANSWER, SessionOut, SessionPage, page_fields, session_out
from memlane.interfaces.http.agent_memory.users import clamp, memory_of

router = APIRouter(tags=["agent memory: sessions"], route_class=FlatErrorRoute)


@router.post("/users/{user_id}/sessions", status_code=201, **ANSWER)
def create_session(user_id: str, body: AgentSessionIn, request: Request) -> SessionOut:
    """Open a session with its annotations, metadata and the default TTL of its blocks: 201; 409 if the
    user has a session of that id; 404 if there is no such user."""
    for_user(request, user_id, write=True)
    check_id(body.session_id, "session_id")
    with api_fields(renamed(("user", "user_id"), ("default_ttl_s", "memory_blocks_ttl"))):
        session = memory_of(request).create_session(
            user_id,
            body.session_id,
            annotations=body.annotations,
            metadata=body.metadata,
            default_ttl_s=body.memory_blocks_ttl,
            exist_ok=False,
        )
    return session_out(session)


@router.get("/users/{user_id}/sessions", **ANSWER)
def list_sessions(
    user_id: str,
    request: Request,
    limit: Annotated[int | None, Query(ge=1)] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> SessionPage:
    """The user's sessions, newest started first (``limit`` 50 by default, at most 500); 404 for an unknown
    user."""
    for_user(request, user_id, write=False)
    memory = memory_of(request)
    memory.get_user(user_id)  # 404 for an unknown user, not an empty list
    page = memory.list_sessions(user_id, limit=clamp(limit, 50, MAX_SESSIONS_LIMIT), offset=offset)
    sessions = [session_out(s) for s in page.items]
    return SessionPage(sessions=sessions, **page_fields(page, len(sessions)))


@router.get("/users/{user_id}/sessions/{session_id}", **ANSWER)
def get_session(user_id: str, session_id: str, request: Request) -> SessionOut:
    """One session; 404 if the user has none of that id."""
    for_user(request, user_id, write=False)
    check_id(session_id, "session_id")
    return session_out(memory_of(request).get_session(user_id, session_id))


@router.put("/users/{user_id}/sessions/{session_id}", **ANSWER)
def update_session(
    user_id: str, session_id: str, request: Request, body: AgentSessionUpdateIn | None = None
) -> SessionOut:
    """Replace the session's annotations or metadata (what is omitted is kept); 400
    ``SESSION_ALREADY_ENDED`` if it has ended."""
    for_user(request, user_id, write=True)
    check_id(session_id, "session_id")
    if body is None or (body.annotations is None and body.metadata is None):
        raise ApiError(400, "INVALID_REQUEST", "give annotations or metadata", {"field": "body"})
    session = memory_of(request).update_session(
        user_id, session_id, annotations=body.annotations, metadata=body.metadata
    )
    return session_out(session)


@router.delete("/users/{user_id}/sessions/{session_id}", status_code=204)
def delete_session(user_id: str, session_id: str, request: Request) -> Response:
    """Delete the session and its blocks: 204; 404 if there is none."""
    for_user(request, user_id, write=True)
    check_id(session_id, "session_id")
    memory_of(request).delete_session(user_id, session_id)
    return Response(status_code=204)


@router.post("/users/{user_id}/sessions/{session_id}/end", **ANSWER)
def end_session(user_id: str, session_id: str, request: Request) -> SessionOut:
    """End the session (no body needed): its blocks stay readable and searchable, it takes no more. 400
    ``SESSION_ALREADY_ENDED`` if it had ended."""
    for_user(request, user_id, write=True)
    check_id(session_id, "session_id")
    return session_out(memory_of(request).end_session(user_id, session_id))
