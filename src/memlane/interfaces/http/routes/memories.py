"""Memories and search: every route acts for the user of the caller's key, never one named in the request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import Query, Request, Response

from memlane.core.model import AddResult
from memlane.interfaces.http.auth import Admin, Caller, UserCaller, UserKey
from memlane.interfaces.http.routes.common import BlockIdPath, api_router
from memlane.interfaces.http.services import services
from memlane.interfaces.wire.errors import check_extract, field_renamed
from memlane.interfaces.wire.model_schemas import (
    BlockPage,
    BlockStatusOut,
    BrowseIn,
    ExchangesIn,
    FactsIn,
    TtlIn,
    TtlOut,
    UpdateIn,
    WriteOptions,
    block_status_out,
    prompt_pair,
)
from memlane.interfaces.wire.schemas import (
    MAX_OFFSET,
    MAX_TEXT,
    AddIn,
    AddOut,
    BlockOut,
    HitOut,
    QueueOut,
    RequeueIn,
    RequeueOut,
    SearchIn,
    add_out,
    block_out,
    error_responses,
    hit_out,
    queue_out,
)
from memlane.interfaces.wire.updates import new_sides

router = api_router("memories", 502, prefix="/v1")
# The queue keeps this many recent errors for a user key to pick its own from.
ERRORS_SCANNED = 200


@router.post("/memories", status_code=201, response_model=AddOut, responses=error_responses(409))
def add_memories(body: AddIn, caller: UserCaller, request: Request) -> AddOut:
    """Store a batch of messages as memory blocks; returns once they are durable and searchable. 409 if the
    user was deleted while the add was in flight (nothing was stored)."""
    assert caller.user is not None
    memory = services(request).memory
    check_extract(body.extract, memory.llm is not None)
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    res = _write(memory.add, caller.user, messages, body, perspective=body.perspective, epoch=caller.epoch)
    return add_out(res)


@router.post("/facts", status_code=201, response_model=AddOut, responses=error_responses(409))
def add_facts(body: FactsIn, user: UserKey, request: Request) -> AddOut:
    """Store standalone facts, one block of kind ``fact`` each. 409 if the session has ended."""
    memory = services(request).memory
    check_extract(body.extract, memory.llm is not None)
    return add_out(_write(memory.add_facts, user, body.facts, body))


@router.post("/exchanges", status_code=201, response_model=AddOut, responses=error_responses(409))
def add_exchanges(body: ExchangesIn, user: UserKey, request: Request) -> AddOut:
    """Store exchanges given as their two sides, one block each (the sides kept as two fields). 409 if the
    session has ended."""
    memory = services(request).memory
    check_extract(body.extract, memory.llm is not None)
    with field_renamed("pairs", "exchanges"):
        res = _write(memory.add_exchanges, user, [(e.user_content, e.assistant_content) for e in body.exchanges], body)
    return add_out(res)


def _write(
    add: Callable[..., AddResult], user: str, content: Sequence[Any], body: AddIn | WriteOptions, **more: Any
) -> AddResult:
    """``add`` (Memory.add, add_facts or add_exchanges) of ``content`` with the options every write takes."""
    return add(
        user,
        content,
        session_id=body.session_id,
        conversation_id=body.conversation_id,
        time=body.time,
        annotations=body.annotations,
        ttl_s=body.ttl_s,
        prompt=prompt_pair(body.prompt),
        extract=body.extract,
        **more,
    )


@router.post("/search", response_model=list[HitOut])
def search(body: SearchIn, user: UserKey, request: Request) -> list[HitOut]:
    """The user's top-k blocks for the query, best first (the shape of ``memlane search --json``)."""
    return search_hits(request, user, body)


def search_hits(request: Request, user: str, body: SearchIn) -> list[HitOut]:
    """``body``'s search of ``user``'s memory, as the search routes answer it."""
    hits = services(request).memory.search(
        user,
        body.query,
        body.k,
        mode=body.mode,
        before=body.before,
        after=body.after,
        at=body.at,
        filters=body.filters(),
        explain=body.explain,
    )
    return [hit_out(h) for h in hits]


@router.post("/browse", response_model=BlockPage)
def browse(body: BrowseIn, user: UserKey, request: Request) -> BlockPage:
    """The query-less search: every block that passes the filters, newest first by ingest or event time, a
    page at a time with the total."""
    page = services(request).memory.browse(
        user,
        body.filters(),
        order=body.order,
        limit=body.limit,
        offset=body.offset,
        before=body.before,
        after=body.after,
    )
    return BlockPage(items=[block_out(b) for b in page.items], total=page.total, limit=page.limit, offset=page.offset)


@router.post("/memories/ttl", response_model=TtlOut)
def set_ttl(body: TtlIn, user: UserKey, request: Request) -> TtlOut:
    """A new TTL, counted from now, for all of the user's blocks, one session's, or the listed ones."""
    changed = services(request).memory.set_ttl(
        user, body.ttl_s, session_id=body.session_id, block_ids=None if body.block_ids is None else body.block_ids
    )
    return TtlOut(changed=changed)


@router.get("/memories", response_model=list[BlockOut])
def list_memories(
    user: UserKey,
    request: Request,
    conversation_id: Annotated[str | None, Query(max_length=MAX_TEXT)] = None,
    session_id: Annotated[str | None, Query(max_length=MAX_TEXT)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> list[BlockOut]:
    """The user's blocks in event-time order."""
    blocks = services(request).memory.list(
        user, conversation_id=conversation_id, session_id=session_id, limit=limit, offset=offset
    )
    return [block_out(b) for b in blocks]


@router.get("/memories/{block_id}", response_model=BlockOut)
def get_memory(block_id: BlockIdPath, user: UserKey, request: Request) -> BlockOut:
    """One block; 404 if it does not exist or is another user's."""
    return block_out(services(request).memory.get(user, block_id))


@router.patch("/memories/{block_id}", response_model=BlockOut, responses=error_responses(409))
@router.put("/memories/{block_id}", response_model=BlockOut, responses=error_responses(409))
def update_memory(block_id: BlockIdPath, body: UpdateIn, user: UserKey, request: Request) -> BlockOut:
    """Update a block in place (same id): new content is embedded, indexed and extracted anew;
    annotations given replace the block's; a TTL given restarts its clock. 409 if its session has ended."""
    memory = services(request).memory
    kw: dict[str, Any] = {}
    if body.content is not None:
        kw["content"] = body.content
    if body.user_content is not None or body.assistant_content is not None:
        kw["sides"] = new_sides(memory.get(user, block_id), body.user_content, body.assistant_content)
    if "prompt" in body.model_fields_set:
        kw["prompt"] = prompt_pair(body.prompt)
    if body.extract is not None:
        kw["extract"] = body.extract
    block = memory.update(user, block_id, annotations=body.annotations, ttl_s=body.ttl_s, **kw)
    return block_out(block)


@router.get("/memories/{block_id}/status", response_model=BlockStatusOut)
def memory_status(block_id: BlockIdPath, user: UserKey, request: Request) -> BlockStatusOut:
    """Where the block stands: processing (extraction queued), ready, or extraction_failed."""
    b = services(request).memory.get(user, block_id)
    return block_status_out(b)


@router.post("/memories/{block_id}/requeue", response_model=BlockOut, responses=error_responses(409))
def requeue_memory(block_id: BlockIdPath, user: UserKey, request: Request) -> BlockOut:
    """Queue a failed block's extraction again; answers the block, ``processing`` again."""
    return block_out(services(request).memory.requeue_block(user, block_id))


@router.delete("/memories/{block_id}", status_code=204)
def delete_memory(block_id: BlockIdPath, user: UserKey, request: Request) -> Response:
    """Delete one block with its keys, vectors and job; 404 if it is not the user's."""
    services(request).memory.delete(user, block_id)
    return Response(status_code=204)


@router.get("/queue", response_model=QueueOut, tags=["operations"])
def queue_status(caller: Caller, request: Request) -> QueueOut:
    """The extraction queue: counts by status, throughput and the last errors (a user key sees only its
    own errors; a block's own job status is its ``extraction_status``)."""
    svc = services(request)
    if caller.user is None:
        return queue_out(svc.memory.queue_status())
    return queue_out(svc.memory.queue_status(recent_errors=ERRORS_SCANNED), only_user=caller.user)


@router.post("/queue/retry", response_model=RequeueOut, tags=["operations"])
def retry_jobs(_: Admin, request: Request, body: RequeueIn | None = None) -> RequeueOut:
    """Run failed extraction jobs again: the dead ones are queued again with their attempts reset (their
    blocks back to ``queued``) and, unless ``dead_only``, the queued ones waiting out a backoff after a
    failure (an unreachable LLM, an unusable reply) run now. Only the user's, the blocks', or those that
    failed at or after ``since``, when given; 404 for an unknown user. Idempotent: a second call answers
    zeros. Admin key."""
    body = body or RequeueIn()
    done = services(request).memory.requeue(
        user=body.user, since=body.since, block_ids=body.block_ids, dead_only=body.dead_only
    )
    return RequeueOut(dead=done.dead, waiting=done.waiting)
