"""The Python client of the memlane HTTP service: :class:`Client`, :class:`AsyncClient`, their values and errors."""

from memlane.client.async_client import AsyncClient
from memlane.client.client import Client
from memlane.client.errors import (
    APIError,
    AuthenticationError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ServiceUnavailableError,
    StoreCorruptError,
    TransportError,
)
from memlane.client.models import ComponentHealth, Health, KeyInfo, NewKey, UserDeleted

__all__ = [
    "APIError",
    "AsyncClient",
    "AuthenticationError",
    "Client",
    "ComponentHealth",
    "Health",
    "KeyInfo",
    "NewKey",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ServiceUnavailableError",
    "StoreCorruptError",
    "TransportError",
    "UserDeleted",
]
