"""The registry of extraction prompts: any key reads it (an add names a prompt to extract with), the admin
key writes it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Request, Response

from memlane.core.bounds import MAX_VERSION
from memlane.interfaces.http.auth import Admin, Caller
from memlane.interfaces.http.routes.common import api_router
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.model_schemas import (
    PromptIn,
    PromptOut,
    PromptPage,
    PromptUpdateIn,
    PromptVersionIn,
    PromptVersionOut,
    PromptVersionPage,
    prompt_out,
    prompt_version_out,
)
from memlane.interfaces.wire.schemas import MAX_OFFSET, error_responses

router = api_router("prompts", prefix="/v1/prompts")
PromptPath = Annotated[str, Path(min_length=1, max_length=128)]
VersionPath = Annotated[int, Path(ge=0, le=MAX_VERSION)]
Limit = Annotated[int, Query(ge=1, le=10_000)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]


@router.post("", status_code=201, response_model=PromptOut, responses=error_responses(409))
def create_prompt(body: PromptIn, _: Admin, request: Request) -> PromptOut:
    """A new prompt at version 0; 409 ``already_exists`` if the id is taken (archived ids stay taken until
    purged). Admin key."""
    prompts = services(request).memory.prompts
    return prompt_out(
        prompts.create(body.prompt_id, body.text, description=body.description, annotations=body.annotations)
    )


@router.get("", response_model=PromptPage)
def list_prompts(
    _: Caller, request: Request, limit: Limit = 100, offset: Offset = 0, include_archived: bool = False
) -> PromptPage:
    page = services(request).memory.prompts.list(limit=limit, offset=offset, include_archived=include_archived)
    return PromptPage(items=[prompt_out(p) for p in page.items], total=page.total, limit=page.limit, offset=page.offset)


@router.get("/{prompt_id}", response_model=PromptOut)
def get_prompt(prompt_id: PromptPath, _: Caller, request: Request) -> PromptOut:
    return prompt_out(services(request).memory.prompts.get(prompt_id))


@router.get("/{prompt_id}/versions", response_model=PromptVersionPage)
def list_versions(
    prompt_id: PromptPath, _: Caller, request: Request, limit: Limit = 100, offset: Offset = 0
) -> PromptVersionPage:
    page = services(request).memory.prompts.versions(prompt_id, limit=limit, offset=offset)
    return PromptVersionPage(
        items=[prompt_version_out(v) for v in page.items], total=page.total, limit=page.limit, offset=page.offset
    )


@router.get("/{prompt_id}/versions/{version}", response_model=PromptVersionOut)
def get_version(prompt_id: PromptPath, version: VersionPath, _: Caller, request: Request) -> PromptVersionOut:
    return prompt_version_out(services(request).memory.prompts.version(prompt_id, version))


@router.patch("/{prompt_id}", response_model=PromptOut, responses=error_responses(409))
def update_prompt(prompt_id: PromptPath, body: PromptUpdateIn, _: Admin, request: Request) -> PromptOut:
    """New text adds a version that becomes current; description and annotations change the head. 409 for
    an archived prompt. Admin key."""
    prompts = services(request).memory.prompts
    updated = prompts.update(prompt_id, text=body.text, description=body.description, annotations=body.annotations)
    return prompt_out(updated)


@router.post("/{prompt_id}/archive", status_code=204)
def archive_prompt(prompt_id: PromptPath, _: Admin, request: Request, body: PromptVersionIn | None = None) -> Response:
    """Archive one version, or the whole prompt (its id stays reserved). Admin key."""
    services(request).memory.prompts.archive(prompt_id, None if body is None else body.version)
    return Response(status_code=204)


@router.delete("/{prompt_id}", status_code=204, responses=error_responses(409))
def purge_prompt(
    prompt_id: PromptPath,
    _: Admin,
    request: Request,
    version: Annotated[int | None, Query(ge=0, le=MAX_VERSION)] = None,
) -> Response:
    """Purge one version (``?version=N``; the current one of a prompt with others is 409), or the whole
    prompt, which frees its id. Admin key."""
    services(request).memory.prompts.purge(prompt_id, version)
    return Response(status_code=204)
