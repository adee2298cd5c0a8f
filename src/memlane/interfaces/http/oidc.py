"""OpenID Connect bearer tokens, for deployments whose clients carry an identity provider's access token
(as self-managed Agent Memory servers take) instead of a memlane key.

The service verifies RS256 JWTs against the public keys of a JWKS file its operator configures (the
identity provider's ``jwks_uri`` document, saved; memlane fetches nothing), checks expiry and, when
configured, the issuer and audience, and maps two claims: one names the memlane user the token acts for
(``sub`` by default), the other its role. A verified token is a user's key: it acts on its own user's
paths only, with its role; it never gets the admin key's ``/v1`` routes. One with the admin role is a
service token: on the Agent Memory routes it acts on any user named in the path, as the admin key does
(:mod:`memlane.interfaces.http.agent_memory.auth`).

Role claim values: ``read-only`` / ``ams_ro``, ``read-write`` / ``ams_rw``, ``admin`` / ``ams_admin`` (a
list takes the highest it holds). A token without a recognised role reads only.

Needs PyJWT with its crypto extra: ``pip install 'memlane[oidc]'``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.core.apikeys import ROLE_ADMIN, ROLE_READ_ONLY, ROLE_READ_WRITE
from memlane.core.errors import ConfigError
from memlane.interfaces.wire.oidc import OidcSettings

ALGORITHMS = ["RS256"]
ROLE_NAMES = {
    "read-only": ROLE_READ_ONLY,
    "ams_ro": ROLE_READ_ONLY,
    "read-write": ROLE_READ_WRITE,
    "ams_rw": ROLE_READ_WRITE,
    "admin": ROLE_ADMIN,
    "ams_admin": ROLE_ADMIN,
}
_RANK = {ROLE_READ_ONLY: 0, ROLE_READ_WRITE: 1, ROLE_ADMIN: 2}
LEEWAY_S = 30


@dataclass(frozen=True, slots=True)
class TokenIdentity:
    user: str
    role: str


class TokenRefused(Exception):
    """A token that does not verify; ``code`` is ``TOKEN_EXPIRED`` or ``INVALID_TOKEN``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("ey")


def _role(value: object) -> str:
    names = value if isinstance(value, list) else [value]
    roles = [ROLE_NAMES[n] for n in names if isinstance(n, str) and n in ROLE_NAMES]
    return max(roles, key=_RANK.__getitem__) if roles else ROLE_READ_ONLY


class OidcVerifier:
    """Verifies tokens against the keys of :attr:`OidcSettings.jwks_file`, read once at start."""

    def __init__(self, settings: OidcSettings) -> None:
        try:
            import jwt
        except ImportError as exc:  # the extra is not installed
            raise ConfigError("OIDC tokens need PyJWT: pip install 'memlane[oidc]'") from exc
        self.settings = settings
        self._jwt = jwt
        try:
            document = json.loads(Path(settings.jwks_file).read_text(encoding="utf-8"))
            self._keys = {k.key_id: k for k in jwt.PyJWKSet.from_dict(document).keys if k.key_id}
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise ConfigError(f"cannot read the OIDC key set in {settings.jwks_file}: {exc}") from exc
        if not self._keys:
            raise ConfigError(f"the OIDC key set in {settings.jwks_file} has no key with a 'kid'")

    def verify(self, token: str) -> TokenIdentity:
        """The user and role a valid token names; TokenRefused otherwise."""
        jwt = self._jwt
        s = self.settings
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = self._keys.get(kid) if isinstance(kid, str) else None
            if key is None:
                raise TokenRefused("INVALID_TOKEN", "the token's signing key is not in the configured key set")
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=s.audience,
                issuer=s.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp"], "verify_aud": s.audience is not None},
            )
        except jwt.ExpiredSignatureError as exc:
            raise TokenRefused("TOKEN_EXPIRED", "the token has expired") from exc
        except jwt.PyJWTError as exc:
            raise TokenRefused("INVALID_TOKEN", f"the token does not verify: {exc}") from exc
        user = claims.get(s.user_claim)
        if not isinstance(user, str) or not user.strip():
            raise TokenRefused("INVALID_TOKEN", f"the token has no {s.user_claim!r} claim naming a user")
        return TokenIdentity(user=user, role=_role(claims.get(s.role_claim)))
