"""What the routes work with, built once by the app factory and kept on ``app.state``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fastapi import Request

from memlane.core.apikeys import ApiKeys
from memlane.core.memory import Memory
from memlane.interfaces.http.integrity import IntegrityWatch
from memlane.interfaces.http.metrics import Metrics
from memlane.interfaces.http.oidc import OidcVerifier
from memlane.interfaces.http.settings import HttpSettings


class Count:
    """A running count that the routes, run in a thread pool, add to at once."""

    def __init__(self) -> None:
        self._value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self._value += 1

    @property
    def value(self) -> int:
        return self._value


@dataclass(frozen=True, slots=True)
class Services:
    """``admin_key`` None means the insecure development mode: admin routes need no key.
    ``agent_queue_full``: the Agent Memory adds refused (429) because the extraction queue was full."""

    memory: Memory
    keys: ApiKeys
    admin_key: str | None
    metrics: Metrics
    settings: HttpSettings
    integrity: IntegrityWatch
    oidc: OidcVerifier | None = None
    agent_queue_full: Count = field(default_factory=Count)


def services(request: Request) -> Services:
    """The services of the app serving ``request``."""
    svc = request.app.state.services
    assert isinstance(svc, Services)
    return svc
