"""Users (6 routes): create, list, get, update, delete, and the bulk TTL change of a user's blocks."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.interfaces.http.agent_memory.auth import admin_key, check_id, for_user
from memlane.interfaces.http.agent_memory.errors import ApiError, FlatErrorRoute, api_fields, renamed
from memlane.interfaces.http.agent_memory.schemas import (
    MAX_OFFSET,
    MAX_SESSIONS_LIMIT,
    MAX_USERS_LIMIT,
    AgentTtlIn,
    AgentUserIn,
    AgentUserUpdateIn,
)
from memlane.interfaces.http.agent_memory.shapes import ANSWER, TtlSetOut, UserOut, UserPage, page_fields, user_out
from memlane.interfaces.http.services import services

router = APIRouter(tags=["agent memory: users"], route_class=FlatErrorRoute)
# The core's names of this API's fields.
USER_FIELDS = renamed(("user", "user_id"), ("display_name", "name"))


def memory_of(request: Request) -> Memory:
    return services(request).memory


def clamp(limit: int | None, default: int, maximum: int) -> int:
    """A page size within that API's bounds: a larger one is served as the maximum (and echoed so)."""
    return default if limit is None else min(limit, maximum)


def session_ids(memory: Memory, user: str) -> list[str]:
    """The user's session ids, newest first (at most as many as a page of sessions holds)."""
    return [s.session_id for s in memory.list_sessions(user, limit=MAX_SESSIONS_LIMIT).items]


def _invalid(message: str, field: str) -> ApiError:
    return ApiError(400, "INVALID_REQUEST", message, {"field": field})


@router.post("/users", status_code=201, **ANSWER)
def create_user(body: AgentUserIn, request: Request) -> UserOut:
    """Create a user with a display name and metadata: 201, or 409 if the id is taken. The admin key creates
    any user; a user's key or OIDC token only its own id (a key's user exists already: that 409)."""
    for_user(request, check_id(body.user_id, "user_id"), write=True)
    if not body.name.strip():
        raise _invalid("name must not be blank", "name")
    memory = memory_of(request)
    with api_fields(USER_FIELDS):
        memory.create_user(body.user_id, display_name=body.name, metadata=body.metadata or {}, exist_ok=False)
    return user_out(memory.get_user(body.user_id), [])


@router.get("/users", **ANSWER)
def list_users(
    request: Request,
    limit: Annotated[int, Query(ge=1)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    name: Annotated[str | None, Query()] = None,
    metadata: Annotated[list[str] | None, Query()] = None,
) -> UserPage:
    """Users by exact display name and metadata ``key=value`` pairs (repeated; all must hold), a page at a
    time (``limit`` at most 500). Admin key."""
    admin_key(request)
    pairs: dict[str, str] = {}
    for item in metadata or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _invalid(f"metadata filters are key=value, not {item!r}", "metadata")
        pairs[key] = value
    if name is not None and not name.strip():
        raise _invalid("name must not be blank", "name")
    # That API's clients send every value as a string: {"level": 3} is found by level=3.
    page = memory_of(request).list_users(
        name=name, metadata_text=pairs or None, limit=clamp(limit, 50, MAX_USERS_LIMIT), offset=offset
    )
    users = [user_out(u) for u in page.items]
    return UserPage(users=users, **page_fields(page, len(users)))


@router.get("/users/{user_id}", **ANSWER)
def get_user(user_id: str, request: Request) -> UserOut:
    """One user with its session ids; 404 if there is none. The admin key, or the user's own key."""
    for_user(request, user_id, write=False)
    memory = memory_of(request)
    info = memory.get_user(user_id)
    return user_out(info, session_ids(memory, user_id))


@router.put("/users/{user_id}", **ANSWER)
def update_user(user_id: str, request: Request, body: AgentUserUpdateIn | None = None) -> UserOut:
    """Change the display name or the metadata (what is omitted is kept)."""
    for_user(request, user_id, write=True)
    if body is None or (body.name is None and body.metadata is None):
        raise _invalid("give name or metadata", "body")
    if body.name is not None and not body.name.strip():
        raise _invalid("name must not be blank", "name")
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["display_name"] = body.name
    if body.metadata is not None:
        changes["metadata"] = body.metadata
    memory = memory_of(request)
    with api_fields(USER_FIELDS):
        info = memory.update_user(user_id, **changes)
    return user_out(info, session_ids(memory, user_id))


@router.delete("/users/{user_id}", status_code=204)
def delete_user(user_id: str, request: Request) -> Response:
    """Delete the user and everything of theirs (sessions, blocks, keys): 204; 404 if there is none."""
    for_user(request, user_id, write=True)
    memory = memory_of(request)
    memory.get_user(user_id)
    memory.delete_user(user_id)
    return Response(status_code=204)


@router.put("/users/{user_id}/ttl", **ANSWER)
def modify_ttl(user_id: str, body: AgentTtlIn, request: Request) -> TtlSetOut:
    """Give the user's blocks (or one session's, or the listed ones of that session) a new TTL in seconds
    from now (0: never expire)."""
    for_user(request, user_id, write=True)
    if body.block_ids is not None and body.session_id is None:
        raise _invalid("block_ids needs session_id", "block_ids")
    if body.block_ids is not None and (not body.block_ids or not all(b.strip() for b in body.block_ids)):
        raise _invalid("block_ids must be non-empty ids", "block_ids")
    memory = memory_of(request)
    if body.session_id is not None:
        memory.get_session(user_id, body.session_id)
    with api_fields(renamed(("ttl_s", "new_ttl"))):
        if body.block_ids is None or body.session_id is None:
            changed = memory.set_ttl(user_id, body.new_ttl, session_id=body.session_id)
        else:
            # The listed blocks of that session only: another session's are left as they are.
            owned = Filters(sessions=(body.session_id,), block_ids=tuple(body.block_ids))
            ids = [b.id for b in memory.browse(user_id, owned, limit=len(body.block_ids)).items]
            changed = memory.set_ttl(user_id, body.new_ttl, block_ids=ids) if ids else 0
    return TtlSetOut(message=f"TTL set on {changed} memory blocks", updated_count=changed)
