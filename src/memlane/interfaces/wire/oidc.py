"""What OpenID Connect bearer tokens are checked against (:mod:`memlane.interfaces.http.oidc` verifies them).

It is here, not in the HTTP service, because ``memlane serve`` builds it from its options: the CLI hands it
to the service through :mod:`memlane.interfaces.serve` and never imports the service itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """Where the identity provider's public keys are, what the tokens must say (``None``: not checked), and
    which claims name the user and the role."""

    jwks_file: Path
    issuer: str | None = None
    audience: str | None = None
    user_claim: str = "sub"
    role_claim: str = "role"
