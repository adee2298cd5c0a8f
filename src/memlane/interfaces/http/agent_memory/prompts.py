"""The prompt registry (7 routes): global named extraction prompts with immutable versions from 0.

Any key reads it; writing it needs the admin key or a key with the ``admin`` role. A prompt's text is
added to memlane's extraction prompt as instructions; the output (a summary and facts) stays memlane's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from memlane.core.errors import PromptArchivedError
from memlane.core.model_checks import check_version
from memlane.interfaces.http.agent_memory.auth import check_id, registry
from memlane.interfaces.http.agent_memory.errors import ApiError, FlatErrorRoute, api_fields, renamed
from memlane.interfaces.http.agent_memory.schemas import (
    MAX_OFFSET,
    MAX_PROMPTS_LIMIT,
    AgentPromptIn,
    AgentPromptUpdateIn,
)
from memlane.interfaces.http.agent_memory.shapes import (
    ANSWER,
    PromptOut,
    PromptPage,
    VersionOut,
    VersionPage,
    page_fields,
    prompt_out,
    version_out,
)
from memlane.interfaces.http.agent_memory.users import clamp, memory_of

router = APIRouter(tags=["agent memory: prompts"], route_class=FlatErrorRoute)
PROMPT_FIELDS = renamed(("text", "prompt"))  # the core's name of a prompt's text
Limit = Annotated[int, Query(ge=1)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]


def _blank(field: str) -> ApiError:
    return ApiError(400, "INVALID_REQUEST", f"{field} must not be blank", {"field": field})


def _vid(value: str | None, *, required: bool) -> int | None:
    """``all`` (None), a version number, or 400."""
    if value is None:
        if required:
            raise ApiError(400, "INVALID_REQUEST", "vid is required: a version number, or all", {"field": "vid"})
        return None
    if value == "all" and required:
        return None
    if not (value.isascii() and value.isdigit()):
        message = f"vid must be a version number (or all), not {value!r}"
        raise ApiError(400, "INVALID_REQUEST", message, {"field": "vid"})
    return check_version(int(value), "vid")


@router.post("/prompts", status_code=201, **ANSWER)
def create_prompt(body: AgentPromptIn, request: Request) -> PromptOut:
    """A new prompt at version 0: 201; 409 if the id exists or is archived (reserved until purged)."""
    registry(request, write=True)
    check_id(body.prompt_id, "prompt_id")
    for field in ("prompt", "description"):
        if not getattr(body, field).strip():
            raise _blank(field)
    with api_fields(PROMPT_FIELDS):
        prompt = memory_of(request).prompts.create(
            body.prompt_id, body.prompt, description=body.description, annotations=body.annotations
        )
    return prompt_out(prompt)


@router.get("/prompts", **ANSWER)
def list_prompts(request: Request, limit: Limit = 100, offset: Offset = 0) -> PromptPage:
    """The prompts, a page at a time (``limit`` at most 1000)."""
    registry(request, write=False)
    page = memory_of(request).prompts.list(limit=clamp(limit, 100, MAX_PROMPTS_LIMIT), offset=offset)
    prompts = [prompt_out(p) for p in page.items]
    return PromptPage(prompts=prompts, **page_fields(page, len(prompts)))


@router.get("/prompts/{prompt_id}", **ANSWER)
def get_prompt(prompt_id: str, request: Request, vid: str | None = None) -> PromptOut | VersionOut:
    """The prompt's head, or with ``vid`` that version; 404 if there is none."""
    registry(request, write=False)
    check_id(prompt_id, "prompt_id")
    prompts = memory_of(request).prompts
    version = _vid(vid, required=False)
    if version is None:
        return prompt_out(prompts.get(prompt_id))
    return version_out(prompts.version(prompt_id, version))


@router.put("/prompts/{prompt_id}", **ANSWER)
def update_prompt(prompt_id: str, request: Request, body: AgentPromptUpdateIn | None = None) -> PromptOut:
    """New text makes a new version, which becomes current; description and annotations belong to the head.
    404 if there is no such prompt, 409 if it is archived."""
    registry(request, write=True)
    check_id(prompt_id, "prompt_id")
    if body is None or (body.prompt is None and body.description is None and body.annotations is None):
        raise ApiError(400, "INVALID_REQUEST", "give prompt, description or annotations", {"field": "body"})
    for field in ("prompt", "description"):
        value = getattr(body, field)
        if value is not None and not value.strip():
            raise _blank(field)
    with api_fields(PROMPT_FIELDS):
        prompt = memory_of(request).prompts.update(
            prompt_id, text=body.prompt, description=body.description, annotations=body.annotations
        )
    return prompt_out(prompt)


@router.delete("/prompts/{prompt_id}", status_code=204)
def purge_prompt(prompt_id: str, request: Request, vid: str | None = None) -> Response:
    """Delete a version (``vid=<n>``) or the whole prompt (``vid=all``, which frees its id) for good; 409
    for the current version of a prompt with others."""
    registry(request, write=True)
    check_id(prompt_id, "prompt_id")
    memory_of(request).prompts.purge(prompt_id, _vid(vid, required=True))
    return Response(status_code=204)


@router.get("/prompts/{prompt_id}/versions", **ANSWER)
def list_versions(prompt_id: str, request: Request, limit: Limit = 100, offset: Offset = 0) -> VersionPage:
    """The prompt's versions, a page at a time (``limit`` at most 1000)."""
    registry(request, write=False)
    check_id(prompt_id, "prompt_id")
    page = memory_of(request).prompts.versions(prompt_id, limit=clamp(limit, 100, MAX_PROMPTS_LIMIT), offset=offset)
    versions = [version_out(v) for v in page.items]
    return VersionPage(versions=versions, **page_fields(page, len(versions)))


@router.put("/prompts/{prompt_id}/archive", status_code=204)
def archive_prompt(prompt_id: str, request: Request, vid: str | None = None) -> Response:
    """Archive a version or (``vid=all``) the prompt: kept, no longer usable; 409 if it was archived."""
    registry(request, write=True)
    check_id(prompt_id, "prompt_id")
    prompts = memory_of(request).prompts
    version = _vid(vid, required=True)
    # The registry archives idempotently; that API answers a second archive with 409.
    if (prompts.get(prompt_id) if version is None else prompts.version(prompt_id, version)).archived:
        raise PromptArchivedError(prompt_id, version)
    prompts.archive(prompt_id, version)
    return Response(status_code=204)
