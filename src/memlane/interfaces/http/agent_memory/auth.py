"""Who may do what on the Agent Memory routes.

That API addresses the user in the path (``/users/{user_id}/...``) and its clients send one bearer token
for every user. memlane keeps its own guarantee under that model:

* the admin key (``MEMLANE_ADMIN_KEY``) acts on any user named in the path, like that API's admin token,
  and so does an OpenID Connect token whose role claim says admin (``ams_admin``): one service token for
  every end user;
* a user's key acts only on its own user's paths: any other user's is 403, whether that user exists or
  not, so an answer tells nothing of other users;
* a key's role bounds what it may do: ``read-only`` reads (a search is a read), ``read-write`` also
  writes, ``admin`` also writes the (global) prompt registry; every write of a read-only key is 403;
* listing every user (``GET /users``) needs the admin key; creating one (``POST /users``) too, but for its
  own id (a key's user exists, so that is a 409; an OIDC token may create its user);
* no token is accepted only in insecure development mode (``--insecure-dev``), where it acts as the admin.

Path ids follow that API's rule (non-blank; no ``/ ? # %``; not ``.`` or ``..``): anything else is a 400
before any lookup.
"""

from __future__ import annotations

from fastapi import Request

from memlane.core.apikeys import ROLE_ADMIN, ROLE_READ_ONLY
from memlane.core.names import DOT_NAMES, PATH_CHARACTERS
from memlane.interfaces.http.agent_memory.errors import ApiError
from memlane.interfaces.http.auth import Principal, authenticate

# The core's name rule (memlane.core.names), said as this API says errors, before any lookup.
_BAD_ID_CHARS = frozenset(PATH_CHARACTERS)


def check_id(value: str, field: str) -> str:
    """A path id by that API's rule; 400 ``INVALID_REQUEST`` naming ``field`` otherwise."""
    if not value.strip():
        raise ApiError(400, "INVALID_REQUEST", f"{field} must not be blank", {"field": field})
    if value in DOT_NAMES:
        raise ApiError(400, "INVALID_REQUEST", f"{field} must not be '.' or '..'", {"field": field})
    bad = sorted(_BAD_ID_CHARS.intersection(value))
    if bad:
        message = f"{field} must not contain any of / ? # % (found {' '.join(bad)})"
        raise ApiError(400, "INVALID_REQUEST", message, {"field": field})
    return value


def _forbidden(message: str) -> ApiError:
    return ApiError(403, "FORBIDDEN", message)


def caller(request: Request) -> Principal:
    """The caller; 401 without a valid key (the route class turns the AuthError into the flat body)."""
    return authenticate(request)


def for_user(request: Request, user_id: str, *, write: bool) -> Principal:
    """The caller, allowed to read (or, with ``write``, to write) ``user_id``'s memory; 401/403/400 otherwise."""
    who = caller(request)
    check_id(user_id, "user_id")
    if not (who.admin or who.any_user) and who.user != user_id:
        raise _forbidden("this key acts only on its own user's paths")
    if write and who.role == ROLE_READ_ONLY:
        raise _forbidden("this key is read-only: writes need a read-write or admin key")
    return who


def admin_key(request: Request) -> Principal:
    """The admin key (or insecure dev mode's no key), or an OIDC token with the admin role; 403 for a
    user's key."""
    who = caller(request)
    if not (who.admin or who.any_user):
        raise _forbidden("this route needs the admin key")
    return who


def registry(request: Request, *, write: bool) -> Principal:
    """Any key reads the prompt registry; writing it needs the admin key or a key with the admin role."""
    who = caller(request)
    if write and not (who.admin or who.role == ROLE_ADMIN):
        raise _forbidden("writing the prompt registry needs the admin key or a key with the admin role")
    return who
