"""What the routes work with, built once by the app factory and kept on ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from memlane.core.apikeys import ApiKeys
from memlane.core.memory import Memory
from memlane.interfaces.http.integrity import IntegrityWatch
from memlane.interfaces.http.metrics import Metrics
from memlane.interfaces.http.oidc import OidcVerifier
from memlane.interfaces.http.settings import HttpSettings


@dataclass(frozen=True, slots=True)
class Services:
    """``admin_key`` None means the insecure development mode: admin routes need no key."""

    memory: Memory
    keys: ApiKeys
    admin_key: str | None
    metrics: Metrics
    settings: HttpSettings
    integrity: IntegrityWatch
    oidc: OidcVerifier | None = None


def services(request: Request) -> Services:
    """The services of the app serving ``request``."""
    svc = request.app.state.services
    assert isinstance(svc, Services)
    return svc
