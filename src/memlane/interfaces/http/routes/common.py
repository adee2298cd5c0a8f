"""What the routers of memlane's own API share: the errors any of their routes may answer, the path
parameters that name a user, a session, a block or an API key, and the route arguments of a create that may find its
object already there."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel

from memlane.interfaces.wire.schemas import MAX_TEXT, error_responses

# What any route may answer besides its own outcomes: a bad, unauthenticated, refused or oversized request,
# a user or object not found, an invalid body, a store that is unavailable.
ROUTE_ERRORS = (400, 401, 403, 404, 413, 422, 503)

UserPath = Annotated[str, Path(min_length=1, max_length=MAX_TEXT)]
SessionPath = Annotated[str, Path(min_length=1, max_length=MAX_TEXT)]
BlockIdPath = Annotated[str, Path(min_length=1, max_length=64)]
KeyIdPath = Annotated[str, Path(min_length=1, max_length=64)]


def api_router(tag: str, *more_errors: int, prefix: str = "") -> APIRouter:
    """A router whose routes are documented under ``tag`` and may answer :data:`ROUTE_ERRORS` and
    ``more_errors``."""
    return APIRouter(prefix=prefix, tags=[tag], responses=error_responses(*sorted({*ROUTE_ERRORS, *more_errors})))


def create_route(model: type[BaseModel], existed: str) -> dict[str, Any]:
    """The route arguments of a create: 201 with the new ``model``, 409 when one exists already, or 200 with
    that one when the request accepts it (``existed`` says when)."""
    return {
        "status_code": 201,
        "response_model": model,
        "responses": {**error_responses(409), 200: {"model": model, "description": existed}},
    }
