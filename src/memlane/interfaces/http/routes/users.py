"""Users and their API keys: the admin's routes (and a user may delete themself)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from memlane.core.apikeys import ROLE_READ_WRITE
from memlane.core.errors import NotFoundError, ValidationError
from memlane.interfaces.http.auth import Admin, AdminOrSelf
from memlane.interfaces.http.routes.common import KeyIdPath, UserPath, api_router, create_route
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.model_schemas import UserInfoOut, UserUpdateIn, user_info_out
from memlane.interfaces.wire.schemas import (
    MAX_OFFSET,
    MAX_TEXT,
    KeyCreated,
    KeyIn,
    KeyInfo,
    UserCreated,
    UserDeleted,
    UserIn,
)
from memlane.interfaces.wire.shapes import key_json

router = api_router("users", prefix="/v1/users")


@router.post("", **create_route(UserCreated, "It existed."))
def create_user(body: UserIn, _: Admin, request: Request, response: Response) -> UserCreated:
    """Create a user (201) with an optional display name and metadata; an existing user is 409
    ``already_exists``, or with ``"exist_ok": true`` confirmed (200, left as it is). Admin key."""
    created = services(request).memory.create_user(
        body.user, display_name=body.display_name, metadata=body.metadata, exist_ok=body.exist_ok
    )
    if not created:
        response.status_code = 200
    return UserCreated(user=body.user, created=created)


@router.get("", response_model=list[UserInfoOut])
def list_users(
    _: Admin,
    request: Request,
    response: Response,
    name: Annotated[str | None, Query(max_length=MAX_TEXT, description="Exact display name.")] = None,
    q: Annotated[
        str | None,
        Query(max_length=256, description="Part of the user's name or display name, any case; % and _ are literal."),
    ] = None,
    metadata: Annotated[
        list[str] | None, Query(max_length=64, description="key=value, repeated: every pair must match exactly.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> list[UserInfoOut]:
    """The users with their number of blocks and sessions, by name; only those with the exact display name,
    every metadata pair, and whose name or display name holds ``q`` (ignoring case), when given. The header
    ``X-Total-Count`` says how many match in all. Admin key."""
    pairs = _metadata_pairs(metadata or [])
    page = services(request).memory.list_users(name=name, metadata=pairs, limit=limit, offset=offset, contains=q)
    response.headers["X-Total-Count"] = str(page.total)
    return [user_info_out(u) for u in page.items]


@router.get("/{user}", response_model=UserInfoOut)
def get_user(user: UserPath, _: AdminOrSelf, request: Request) -> UserInfoOut:
    """One user: blocks, sessions, display name, metadata, last activity. Admin key, or the user's own."""
    return user_info_out(services(request).memory.get_user(user))


@router.patch("/{user}", response_model=UserInfoOut)
def update_user(user: UserPath, body: UserUpdateIn, _: AdminOrSelf, request: Request) -> UserInfoOut:
    """Replace the display name and/or metadata given (a field left out is kept). Admin key, or the user's
    own."""
    given = {f: getattr(body, f) for f in body.model_fields_set}
    return user_info_out(services(request).memory.update_user(user, **given))


def _metadata_pairs(values: list[str]) -> dict[str, str] | None:
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise ValidationError(f"expected key=value, not {value!r}", where="metadata")
        pairs[key] = text
    return pairs or None


@router.post("/{user}/keys", status_code=201, response_model=KeyCreated)
def create_key(user: UserPath, _: Admin, request: Request, body: KeyIn | None = None) -> KeyCreated:
    """A new API key for the user, shown this once (only its hash is stored); 404 if there is no such user.
    Admin key."""
    new = services(request).keys.create(user, body.label if body else "", body.role if body else ROLE_READ_WRITE)
    return KeyCreated(key=new.key, key_id=new.record.key_id, user=user, label=new.record.label, role=new.record.role)


@router.get("/{user}/keys", response_model=list[KeyInfo])
def list_keys(user: UserPath, _: Admin, request: Request) -> list[KeyInfo]:
    """The user's keys, without their secrets. Admin key."""
    return [KeyInfo.model_validate(key_json(k)) for k in services(request).keys.list(user)]


@router.delete("/{user}/keys/{key_id}", status_code=204)
def revoke_key(user: UserPath, key_id: KeyIdPath, _: Admin, request: Request) -> Response:
    """Revoke one key. Admin key."""
    if not services(request).keys.revoke(user, key_id):
        raise NotFoundError(f"key {key_id!r} not found for user {user!r}")
    return Response(status_code=204)


@router.delete("/{user}", response_model=UserDeleted)
def delete_user(user: UserPath, _: AdminOrSelf, request: Request) -> UserDeleted:
    """Delete the user and everything of theirs: blocks, facts, vectors, keyword rows, jobs, API keys and
    LLM calls (when the service has the call log), the keys in the same transaction as the rest. Final: an
    add in flight for the user either landed before and went with them, or fails (409); a later add with
    one of their keys is 401. Admin key, or the user's own key."""
    deleted = services(request).memory.delete_user_counts(user)
    return UserDeleted(user=user, blocks_deleted=deleted.blocks, keys_deleted=deleted.keys)
