"""Memory (5 routes): add messages or facts, update a block, delete blocks, search, list.

Extraction follows the call: ``context_required: false`` skips it; ``async_processing`` (the default)
queues it and answers at once, the blocks ``processing`` until a worker has extracted them;
``async_processing: false`` extracts before answering, within ``agent_sync_timeout_s`` (the LLM client's
retries included): when the LLM cannot be reached, answers garbage or is too slow, 502 ``UPSTREAM_ERROR``,
the blocks stored and searchable, each ``processing`` (queued for a worker) or ``extraction_failed``. A
server without an LLM stores every block ``ready``, unextracted (its models health says the LLM is
``not_configured``). Items over the per-block token limit are left out and reported inside the 201; a full
extraction queue is a 429 with ``Retry-After``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from memlane.core.errors import QueueFullError
from memlane.core.memory import Memory
from memlane.core.model import AddResult, BlockKind, Filters, MemoryBlock
from memlane.core.model_checks import check_version
from memlane.core.timefmt import coerce_time
from memlane.interfaces.http.agent_memory.auth import check_id, for_user
from memlane.interfaces.http.agent_memory.errors import ApiError, FlatErrorRoute, Renames, api_fields, renamed
from memlane.interfaces.http.agent_memory.schemas import (
    MAX_BROWSE,
    MAX_ITEMS,
    MAX_MEMORY_LIMIT,
    MAX_OFFSET,
    AgentAddIn,
    AgentSearchIn,
    AgentUpdateIn,
    DeleteIn,
    FiltersIn,
)
from memlane.interfaces.http.agent_memory.shapes import (
    ANSWER,
    AddedOut,
    BlockPage,
    BlocksFound,
    DeletedOut,
    UpdatedOut,
    block_out,
    hit_out,
    page_fields,
    rejected_out,
)
from memlane.interfaces.http.agent_memory.users import clamp, memory_of
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.errors import scrub_addresses

router = APIRouter(tags=["agent memory: memory"], route_class=FlatErrorRoute)
SESSION_PATH = "/users/{user_id}/sessions/{session_id}/memory"


# The core's names of this API's fields: a block's TTL, its prompt, an exchange's sides.
_PROMPT = renamed(("prompt.prompt_id", "prompt_id"), ("prompt.version", "prompt_vid"), ("prompt", "prompt_id"))
ADD_FIELDS: Renames = (
    (r"^pairs\[(\d+)\]\[0\]", r"messages[\1].user_content"),
    (r"^pairs\[(\d+)\]\[1\]", r"messages[\1].assistant_content"),
    *renamed(("pairs", "messages"), ("ttl_s", "memory_block_ttl"), ("time", "created_at"), ("user", "user_id")),
    *_PROMPT,
)
UPDATE_FIELDS: Renames = (
    (r"^sides\[0\]", "message.user_content"),
    (r"^sides\[1\]", "message.assistant_content"),
    *renamed(("sides", "message"), ("content", "fact"), ("ttl_s", "memory_block_ttl")),
    *_PROMPT,
)


def _invalid(message: str, field: str, code: str = "INVALID_REQUEST") -> ApiError:
    return ApiError(400, code, message, {"field": field})


def extract_mode(memory: Memory, async_processing: bool, context_required: bool | None) -> str:
    """The core's extraction mode for a call: off when the call or the server (no LLM) has none."""
    if context_required is False or memory.llm is None:
        return "off"
    return "async" if async_processing else "sync"


def _prompt(
    prompt_id: str | None, prompt_vid: int | None, context_required: bool | None
) -> tuple[str, int | None] | None:
    """The registry prompt of a call: refused with ``context_required: false``, which turns extraction off.
    (A server without an LLM stamps the prompt on the blocks it stores unextracted.)"""
    if prompt_vid is not None and prompt_id is None:
        raise _invalid("prompt_vid needs prompt_id", "prompt_vid")
    if prompt_id is None:
        return None
    if context_required is False:
        message = "a prompt was given with context_required false, which turns extraction off"
        raise _invalid(message, "prompt_id", "PROMPT_EXTRACTION_DISABLED")
    return (check_id(prompt_id, "prompt_id"), check_version(prompt_vid, "prompt_vid"))


def update_mode(memory: Memory, body: AgentUpdateIn, block: MemoryBlock) -> str | None:
    """The core's extraction mode for an update: off when the call or the server has none; queued when the
    content or prompt changes, or to retry a block whose extraction failed; else the block's own (None).
    An update's extraction is always queued, ``async_processing: false`` included."""
    if body.context_required is False or memory.llm is None:
        return "off"
    content = body.message is not None or body.fact is not None
    steer = body.prompt_id is not None or body.prompt_vid is not None
    if content or steer or block.status == "extraction_failed":
        return "async"
    return None


def _time(value: str | None, field: str) -> datetime | None:
    return None if value is None else coerce_time(value, where=field)


@router.post(SESSION_PATH, status_code=201, **ANSWER)
def add_memory(user_id: str, session_id: str, body: AgentAddIn, request: Request) -> AddedOut:
    """Store each message (one exchange) or each fact as a block of the session: 201 with the block ids in
    input order, and the items over the per-block token limit in ``rejected_details``."""
    for_user(request, user_id, write=True)
    check_id(session_id, "session_id")
    if (body.messages is None) == (body.facts is None):
        raise _invalid("give messages or facts (one of them, not both)", "messages")
    svc = services(request)
    memory = svc.memory
    mode = extract_mode(memory, body.async_processing, body.context_required)
    prompt = _prompt(body.prompt_id, body.prompt_vid, body.context_required)
    session = memory.get_session(user_id, session_id)
    common: dict[str, Any] = {
        "session_id": session_id,
        "conversation_id": session.conversation_id,
        "time": _time(body.created_at, "created_at"),
        "annotations": body.annotations,
        "ttl_s": body.memory_block_ttl,
        "prompt": prompt,
        "extract": mode,
        "sync_timeout_s": svc.settings.agent_sync_timeout_s,
        "max_tokens": svc.settings.agent_block_tokens,
        "max_queued": svc.settings.agent_queue_max,
    }
    try:
        with api_fields(ADD_FIELDS):
            if body.messages is not None:
                pairs = [(m.user_content, m.assistant_content) for m in body.messages]
                added = memory.add_exchanges(user_id, pairs, **common)
            else:
                added = memory.add_facts(user_id, body.facts or [], **common)
    except QueueFullError:
        svc.agent_queue_full.add()  # counted in the batch processor's statistics
        raise
    if mode == "sync" and added.jobs_done < added.jobs_enqueued:
        raise _unfinished(memory, added, svc.settings.agent_sync_timeout_s)
    stored, rejected = len(added.block_ids), len(added.rejected)
    return AddedOut(
        message=f"{stored} memory blocks stored" + (f", {rejected} rejected" if rejected else ""),
        accepted_count=stored,
        block_ids=list(added.block_ids),
        rejected_count=rejected,
        rejected_details=[rejected_out(r) for r in added.rejected],
    )


def _unfinished(memory: Memory, added: AddResult, timeout_s: float) -> ApiError:
    """The 502 of an add whose synchronous extraction did not finish: what failed (without the LLM's
    address), and what state each stored block is left in, with what to do."""
    ids = list(added.block_ids)
    scope = Filters(sessions=(added.session_id,), block_ids=tuple(ids))
    status = {b.id: b.status for b in memory.browse(added.user, scope, limit=len(ids)).items}
    waiting = [i for i in ids if status.get(i) == "processing"]
    failed = [i for i in ids if status.get(i) == "extraction_failed"]
    reason = scrub_addresses(added.extraction_error or "no reply in time")
    parts = [
        f"the LLM did not extract every memory block within {timeout_s:g} s: {reason}",
        f"the {len(ids)} block{'' if len(ids) == 1 else 's'} of this add {'is' if len(ids) == 1 else 'are'} "
        "stored and searchable",
    ]
    if waiting:
        parts.append(
            f"processing, queued for extraction when the LLM answers (do not add again: that stores twice): "
            f"{', '.join(waiting)}"
        )
    if failed:
        parts.append(
            f"extraction_failed (an update of one, async_processing true, extracts it again): {', '.join(failed)}"
        )
    details = {"service": "llm", "block_ids": ids, "processing": waiting, "extraction_failed": failed}
    return ApiError(502, "UPSTREAM_ERROR", "; ".join(parts), details)


def _owned(memory: Memory, user_id: str, session_id: str, block_id: str) -> MemoryBlock:
    """The block, if it is the session's (404 otherwise, as for a block that does not exist)."""
    block = memory.get(user_id, block_id)
    if block.session_id != session_id:
        raise ApiError(404, "BLOCK_NOT_FOUND", f"session {session_id!r} has no memory block {block_id!r}")
    return block


@router.put(SESSION_PATH + "/{block_id}", **ANSWER)
def update_memory(user_id: str, session_id: str, block_id: str, body: AgentUpdateIn, request: Request) -> UpdatedOut:
    """Replace a block's content (a fact's ``fact``, an exchange's ``message``), annotations, TTL or prompt,
    keeping its id: re-embedded, and extracted again when its content or prompt changed."""
    for_user(request, user_id, write=True)
    check_id(session_id, "session_id")
    check_id(block_id, "block_id")
    given = (body.message, body.fact, body.annotations, body.memory_block_ttl, body.prompt_id, body.prompt_vid)
    if all(v is None for v in given):
        raise _invalid("give message, fact, annotations, memory_block_ttl, prompt_id or prompt_vid", "body")
    if body.message is not None and body.fact is not None:
        raise _invalid("give message or fact, not both", "message")
    if body.fact is not None and not body.fact.strip():
        raise _invalid("fact must not be blank", "fact")
    memory = memory_of(request)
    changes: dict[str, Any] = {"annotations": body.annotations, "ttl_s": body.memory_block_ttl}
    if body.prompt_id == "default":
        if body.prompt_vid is not None:
            raise _invalid("prompt_vid needs a prompt_id other than 'default'", "prompt_vid")
        changes["prompt"] = None
    elif body.prompt_id is not None or body.prompt_vid is not None:
        changes["prompt"] = _prompt(body.prompt_id, body.prompt_vid, body.context_required)
    if body.fact is not None:
        changes["content"] = body.fact
    if body.message is not None:
        changes["sides"] = (body.message.user_content, body.message.assistant_content)
    block = _owned(memory, user_id, session_id, block_id)
    if body.fact is not None and block.kind is not BlockKind.FACT:
        raise _invalid("this block is an exchange: send message, not fact", "fact")
    if body.message is not None and block.kind is BlockKind.FACT:
        raise _invalid("this block is a fact: send fact, not message", "message")
    changes["extract"] = update_mode(memory, body, block)
    with api_fields(UPDATE_FIELDS):
        block = memory.update(user_id, block_id, **changes)
    return UpdatedOut(message="memory block updated", block=block_out(block))


@router.delete(SESSION_PATH, **ANSWER)
def delete_memory(user_id: str, session_id: str, body: DeleteIn, request: Request) -> DeletedOut:
    """Delete the listed blocks of the session, or ``"all"`` of them, in one transaction. A block already
    absent counts as deleted (a retry is safe); a block of another session is not deleted and is reported in
    ``failed_block_ids``; 404 only if nothing could be deleted."""
    for_user(request, user_id, write=True)
    check_id(session_id, "session_id")
    memory = memory_of(request)
    memory.get_session(user_id, session_id)
    if body.block_ids == "all":
        count = len(memory.delete_blocks(user_id, Filters(sessions=(session_id,))))
        return DeletedOut(deleted_count=count, failed_count=0, failed_block_ids=[])
    ids = [body.block_ids] if isinstance(body.block_ids, str) else list(body.block_ids)
    if not ids:
        raise _invalid("block_ids must name at least one block, or be 'all'", "block_ids")
    for block_id in ids:  # every id checked before anything is deleted
        check_id(block_id, "block_ids")
    gone = set(memory.delete_blocks(user_id, Filters(sessions=(session_id,), block_ids=tuple(ids))))
    rest = tuple(dict.fromkeys(i for i in ids if i not in gone))
    # A listed block that is still there is another session's (an absent one was deleted already).
    elsewhere = (
        {b.id for b in memory.browse(user_id, Filters(block_ids=rest), limit=len(rest)).items} if rest else set()
    )
    failed = [i for i in ids if i in elsewhere]
    if len(failed) == len(ids):
        raise ApiError(404, "BLOCK_NOT_FOUND", "no listed block is the session's", {"failed_block_ids": failed})
    return DeletedOut(deleted_count=len(ids) - len(failed), failed_count=len(failed), failed_block_ids=failed)


def _sessions(value: list[str] | str | None, path_session: str) -> tuple[str, ...] | None:
    """The sessions a search covers: the path's by default, the listed ones, or all (None)."""
    if value is None:
        return (path_session,)
    if value == "all" or value == ["all"]:
        return None
    if isinstance(value, str):
        value = [s for s in value.split(",") if s]
    if not value:
        raise _invalid("session_ids must name a session, or be 'all'", "filters.session_ids")
    return tuple(check_id(s, "filters.session_ids") for s in value)


def filters_of(f: FiltersIn, sessions: tuple[str, ...] | None) -> Filters:
    if f.prompt_vid is not None and f.prompt_id is None:
        raise _invalid("prompt_vid needs prompt_id", "filters.prompt_vid")
    return Filters(
        sessions=sessions,
        block_ids=None if f.block_ids is None else tuple(f.block_ids),
        annotations=dict(f.annotations or {}),
        annotations_after_cut=f.annotation_filter_mode == "post",
        ingested_after=_time(f.start_time, "filters.start_time"),
        ingested_before=_time(f.end_time, "filters.end_time"),
        prompt_id=f.prompt_id,
        prompt_version=check_version(f.prompt_vid, "filters.prompt_vid"),
    )


@router.post(SESSION_PATH + "/search", **ANSWER)
def search_memory(user_id: str, session_id: str, request: Request, body: AgentSearchIn | None = None) -> BlocksFound:
    """With a query: at most ``relevant_k`` blocks, best first, each with its ``rel_score``. Without one:
    every matching block (at most 10,000), newest first by ``order_by``. The path's session by default;
    ``session_ids`` widens it (a list, or ``"all"``)."""
    for_user(request, user_id, write=False)
    check_id(session_id, "session_id")
    body = body or AgentSearchIn()
    f = body.filters or FiltersIn()
    memory = memory_of(request)
    memory.get_session(user_id, session_id)
    filters = filters_of(f, _sessions(f.session_ids, session_id))
    after = _time(f.created_start_time, "filters.created_start_time")
    before = _time(f.created_end_time, "filters.created_end_time")
    if body.query is not None:
        if not body.query.strip():
            raise _invalid("query must not be blank (leave it out to list every match)", "query")
        hits = memory.search(user_id, body.query, f.relevant_k, after=after, before=before, filters=filters)
        blocks = [hit_out(h) for h in hits]
    else:
        order = "event" if f.order_by == "created_at" else "ingested"
        page = memory.browse(user_id, filters, order=order, limit=MAX_BROWSE, before=before, after=after)
        blocks = [block_out(b) for b in page.items]
    return BlocksFound(memory_blocks=blocks, count=len(blocks))


@router.get("/users/{user_id}/memory", **ANSWER)
def list_memories(
    user_id: str,
    request: Request,
    limit: Annotated[int, Query(ge=1)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    order_by: Annotated[str, Query(pattern="^(ingested_at|created_at)$")] = "ingested_at",
    session_ids: Annotated[str | None, Query(max_length=MAX_ITEMS * 256)] = None,
) -> BlockPage:
    """The user's blocks, newest first by ``order_by``, a page at a time (``limit`` at most 200): all
    sessions, or ``session_ids`` (comma-separated, or ``all``)."""
    for_user(request, user_id, write=False)
    sessions = None if session_ids in (None, "all") else _sessions(session_ids, "")
    memory = memory_of(request)
    memory.get_user(user_id)
    order = "event" if order_by == "created_at" else "ingested"
    page = memory.browse(
        user_id, Filters(sessions=sessions), order=order, limit=clamp(limit, 20, MAX_MEMORY_LIMIT), offset=offset
    )
    blocks = [block_out(b) for b in page.items]
    return BlockPage(memory_blocks=blocks, **page_fields(page, len(blocks)))
