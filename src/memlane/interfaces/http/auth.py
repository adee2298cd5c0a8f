"""Who is calling: the admin key, a user's key, or nobody.

Keys travel as ``Authorization: Bearer <key>`` (so do OpenID Connect tokens, when the service is configured
for them: :mod:`.oidc`; a verified token acts as its user's key, with its role). The admin key
(``MEMLANE_ADMIN_KEY``) manages users and keys and reads the service's metrics; a user key acts for exactly
one user, which every memory route takes from the key, never from the request. A missing or unknown key is
401; a valid key used where it has no say is 403, whether or not the thing it reaches for exists, so a 403
tells nothing about other users. A read-only key (its role: :data:`memlane.core.apikeys.ROLES`) is 403 on
every write, whatever the route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from memlane.core.apikeys import ROLE_ADMIN, ROLE_READ_ONLY, same_secret
from memlane.interfaces.http.errors import AuthError
from memlane.interfaces.http.oidc import TokenRefused, looks_like_jwt
from memlane.interfaces.http.services import services


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: the admin (``user`` None) or one user's key, with the store's deletion epoch read with
    the key (an add passes it on, so a deletion of the user after this check refuses the add).
    ``any_user``: a verified OpenID Connect token with the admin role, which acts on any user named in an
    Agent Memory path as the admin key does (on ``/v1``, which takes the user from the credential, it is
    ``user``'s token)."""

    user: str | None
    key_id: str | None = None
    epoch: int | None = None
    role: str = ROLE_ADMIN
    any_user: bool = False

    @property
    def admin(self) -> bool:
        return self.user is None


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(401, "the Authorization header must be 'Bearer <key>'")
    return token.strip()


def authenticate(request: Request) -> Principal:
    """The caller of ``request``; 401 without a valid key (in insecure dev mode, no key means admin)."""
    svc = services(request)
    token = bearer_token(request)
    if token is None:
        if svc.admin_key is None:
            return Principal(user=None)
        raise AuthError(401, "missing API key: send 'Authorization: Bearer <key>'")
    if svc.admin_key is not None and same_secret(token, svc.admin_key):
        return Principal(user=None)
    if svc.oidc is not None and looks_like_jwt(token):
        try:
            identity = svc.oidc.verify(token)
        except TokenRefused as exc:
            raise AuthError(401, str(exc), exc.code) from None
        if identity.role == ROLE_READ_ONLY and is_write(request.method, request.url.path):
            raise AuthError(403, "this token is read-only: writes need a read-write or admin role")
        return Principal(user=identity.user, role=identity.role, any_user=identity.role == ROLE_ADMIN)
    verified = svc.keys.verify(token)
    if verified is None:
        raise AuthError(401, "unknown or revoked API key")
    role = verified.record.role
    if role == ROLE_READ_ONLY and is_write(request.method, request.url.path):
        raise AuthError(403, "this key is read-only: writes need a read-write or admin key")
    return Principal(user=verified.user, key_id=verified.record.key_id, epoch=verified.epoch, role=role)


# Routes that take a POST yet only read: searches and browsing.
_READ_POSTS = ("/v1/search", "/v1/browse", "/memory/search")


def is_write(method: str, path: str) -> bool:
    """Whether a request writes: every method but GET, HEAD and OPTIONS, except the searches' POSTs."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return False
    return not (method == "POST" and path.endswith(_READ_POSTS))


def require_admin(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.admin:
        raise AuthError(403, "this route needs the admin key")
    return principal


def require_user_key(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    """A user key's caller; the admin key holds no memories of its own."""
    if principal.user is None:
        raise AuthError(403, "this route needs a user's API key (POST /v1/users/{user}/keys makes one)")
    return principal


def require_user(principal: Annotated[Principal, Depends(require_user_key)]) -> str:
    """The user a user key acts for."""
    assert principal.user is not None
    return principal.user


def require_admin_or_self(user: str, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    """The admin, or the key of ``user`` (the path's user) itself."""
    if principal.admin or principal.user == user:
        return principal
    raise AuthError(403, "a user's key can only act on that user")


Caller = Annotated[Principal, Depends(authenticate)]
Admin = Annotated[Principal, Depends(require_admin)]
UserKey = Annotated[str, Depends(require_user)]
UserCaller = Annotated[Principal, Depends(require_user_key)]
AdminOrSelf = Annotated[Principal, Depends(require_admin_or_self)]
