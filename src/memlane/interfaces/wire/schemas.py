"""Request and response bodies of the HTTP API (and the MCP tools' results).

Requests check types and bounds only; what a value means (a user name, a time, a search mode) is checked
by the core, whose ValidationError names the field. Unknown fields are refused, so a typo is a 422 that
names it instead of a silently ignored option. Responses mirror ``memlane ... --json``.
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, model_validator

from memlane.core.bounds import MAX_OFFSET as MAX_OFFSET  # the routes' offsets, bounded as the core bounds them
from memlane.core.bounds import MAX_VERSION
from memlane.core.jobs import QueueStatus
from memlane.core.model import AddResult, Filters, Hit, MemoryBlock
from memlane.core.retrieval import MAX_K, PRESETS
from memlane.core.timefmt import MAX_EPOCH, MIN_EPOCH
from memlane.interfaces.wire.errors import scrub_addresses
from memlane.interfaces.wire.filters import make_filters
from memlane.interfaces.wire.shapes import block_json, hit_json

MAX_TEXT = 256
MAX_QUERY_CHARS = 10_000


def _time_value(value: object) -> str | float:
    # One validator instead of a str | float union: a union would report its errors per branch
    # ("time.str", "time.float") and, in lax mode, take false for 0.0.
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds) and MIN_EPOCH <= seconds <= MAX_EPOCH:
            return seconds
        raise ValueError(f"epoch seconds must be from {MIN_EPOCH} to {MAX_EPOCH} (years 1 to 9999)")
    raise ValueError("a time is a string or a number of epoch seconds")


TimeValue = Annotated[
    str | float,
    PlainValidator(_time_value),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string"}, {"type": "number", "minimum": MIN_EPOCH, "maximum": MAX_EPOCH}],
            "description": "ISO 8601, '1:56 pm on 8 May, 2023', '2023/04/10 (Mon) 23:07', or epoch seconds; "
            "from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z once in UTC.",
            "examples": ["2023-05-08T13:56:00Z"],
        }
    ),
]
Name = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
MAX_IDS = 10_000
BlockId = Annotated[str, Field(min_length=1, max_length=64)]
PromptId = Annotated[
    str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$", description="Letters, digits, '_', '-'.")
]
MAX_ANNOTATIONS = 64
# Keys are identifiers and values strings; what else a key or value may hold is the core's rule.
Annotations = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=MAX_TEXT)], Annotated[str, Field(max_length=MAX_TEXT)]],
    Field(
        max_length=MAX_ANNOTATIONS,
        description="String labels kept on the blocks (keys are identifiers: letters, digits and '_', not "
        "starting with a digit); searches can filter on them by exact match.",
        examples=[{"topic": "travel", "source": "chat"}],
    ),
]


class Strict(BaseModel):
    """Unknown fields are refused, and no type is coerced into another (false is not 0, "3" is not 3)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# A hundred years: a TTL past the end of the calendar would have no expiry to store.
MAX_TTL_S = 100 * 366 * 24 * 3600
MAX_DESCRIPTION = 200
TtlSeconds = Annotated[
    int, Field(ge=0, le=MAX_TTL_S, description="Seconds from the write until the block expires; 0: never.")
]


class PromptRef(Strict):
    """A registry prompt to extract with: its id and version (null: its current version)."""

    prompt_id: PromptId
    version: int | None = Field(default=None, ge=0, le=MAX_VERSION)

    def pair(self) -> tuple[str, int | None]:
        return (self.prompt_id, self.version)


# -- requests ----------------------------------------------------------------------------------------------


class MessageIn(Strict):
    """One message: ``role`` is user/assistant/system, or a speaker's name in ``speakers`` mode, where it may
    be given as ``speaker`` instead (``{"speaker": "Ana", "content": ...}``, as the CLI and the Python API take
    it). Exactly one of the two."""

    role: Name | None = Field(default=None, description="user, assistant or system; a speaker's name")
    speaker: Name | None = Field(default=None, description="The same as role, for a chat between two people.")
    content: str = Field(min_length=1)
    time: TimeValue | None = None
    id: Name | None = Field(default=None, description="The caller's own message id, kept on its blocks.")

    @model_validator(mode="after")
    def _one_role(self) -> MessageIn:
        if (self.role is None) == (self.speaker is None):
            given = "both role and speaker" if self.role is not None else "neither role nor speaker"
            raise ValueError(f"{given}: a message has one role (or speaker)")
        return self


class AddIn(Strict):
    messages: list[MessageIn] = Field(min_length=1, max_length=10_000)
    conversation_id: Name = "default"
    session_id: Name = "default"
    time: TimeValue | None = Field(default=None, description="The session's time; default: now.")
    perspective: Literal["dual", "speakers", "single"] = "dual"
    extract: Literal["off", "async", "sync"] = Field(
        default="off", description="LLM extraction: off, async (queued for the workers) or sync (before replying)."
    )
    annotations: Annotations | None = None
    ttl_s: TtlSeconds | None = Field(default=None, description="Default: the session's, else the server's.")
    prompt: PromptRef | None = Field(default=None, description="The registry prompt to extract with.")


class FilterFields(Strict):
    """Which blocks may be returned (every rule given must hold)."""

    sessions: list[Name] | None = Field(default=None, max_length=MAX_IDS, description="Only these sessions.")
    block_ids: list[BlockId] | None = Field(default=None, max_length=MAX_IDS, description="Only these blocks.")
    annotations: Annotations | None = Field(default=None, description="Only blocks with every pair, exactly.")
    annotation_filter: Literal["pre", "post"] = Field(
        default="pre",
        description="pre: annotations are checked before the top-k cut; post: on the top k after it (fewer may "
        "remain).",
    )
    kinds: list[Literal["exchange", "fact"]] | None = None
    ingested_after: TimeValue | None = Field(default=None, description="Only blocks written at or after this.")
    ingested_before: TimeValue | None = Field(default=None, description="Only blocks written before this.")
    prompt_id: PromptId | None = Field(default=None, description="Only blocks extracted by this registry prompt.")
    prompt_version: int | None = Field(default=None, ge=0, le=MAX_VERSION)

    def filters(self) -> Filters | None:
        return make_filters(
            sessions=self.sessions,
            block_ids=self.block_ids,
            annotations=self.annotations,
            annotation_filter=self.annotation_filter,
            kinds=self.kinds,
            ingested_after=self.ingested_after,
            ingested_before=self.ingested_before,
            prompt_id=self.prompt_id,
            prompt_version=self.prompt_version,
        )


class SearchIn(FilterFields):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=10, ge=1, le=MAX_K)
    mode: str = Field(default="hybrid", max_length=64, description=f"One of: {', '.join(PRESETS)}.")
    before: TimeValue | None = Field(default=None, description="Only blocks whose event time is before this.")
    after: TimeValue | None = Field(default=None, description="Only blocks whose event time is at or after this.")
    at: TimeValue | None = Field(
        default=None,
        description="When the question is asked (default: now); time phrases in the query such as 'two weeks "
        "ago' are read against it.",
    )
    explain: bool = Field(
        default=False,
        description="true: each hit says why it ranked (explanation); the hits and their order are the same.",
    )


class UserIn(Strict):
    # The name rule is the core's (memlane.core.names), so that every interface applies the same one.
    user: Annotated[
        Name,
        Field(description="The user's name: printable, NFC, no space at either end, none of / ? # %, not . or .."),
    ]
    display_name: str | None = Field(default=None, max_length=MAX_TEXT, description="A name to show.")
    metadata: dict[str, Any] | None = Field(default=None, description="Any JSON object.")
    exist_ok: bool = Field(
        default=False, description="true: an existing user is answered 200, left as it is, instead of 409."
    )


class KeyIn(Strict):
    label: str = Field(default="", max_length=MAX_TEXT, description="A note for the admin: who holds the key.")
    role: Literal["read-only", "read-write", "admin"] = Field(
        default="read-write",
        description="read-only: reads and searches; read-write: also writes; admin: also the prompt registry.",
    )


# -- responses ---------------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable: validation_error, not_found, unauthorized, forbidden, ...")
    message: str
    field: str | None = Field(default=None, description="The offending input, e.g. messages[0].content.")
    request_id: str | None = Field(
        default=None, description="Also the X-Request-ID header; the server log's lines about the request carry it."
    )


class FlatErrorOut(BaseModel):
    """The same error in the Agent Memory API's flat shape (``docs/integrations/agent-memory.md``)."""

    error: str = Field(description="The code in capitals: VALIDATION_ERROR, NOT_FOUND, ...")
    message: str
    details: dict[str, Any] = Field(description="``field`` when the error names one.")
    request_id: str | None = None


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: ErrorDetail
    detail: FlatErrorOut = Field(
        description="The same error as the Agent Memory API's clients read it (they unwrap ``detail``): what "
        "one of them given this API's URL (a base URL ending in /v1) shows its caller."
    )


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer with."""
    return {s: {"model": ErrorOut} for s in statuses}


class SideOut(BaseModel):
    role: str
    content: str


class BlockOut(BaseModel):
    """A memory block, as ``memlane get`` prints it."""

    block_id: str
    user: str
    conversation_id: str
    session_id: str
    exchange_index: int
    perspective: str
    mode: str
    message: str
    summary: str | None
    facts: list[str]
    time: str
    time_annotation: str
    ingest_time: str
    extraction_status: str = Field(description="off, queued, done or failed: the block's extraction job.")
    message_ids: list[str]
    content_hash: str
    annotations: dict[str, str]
    kind: Literal["exchange", "fact"] = Field(description="exchange (a message and its reply) or fact.")
    sides: list[SideOut] = Field(
        description="An exchange's two sides as given (POST /v1/exchanges); empty for a fact and for blocks "
        "made from a message list."
    )
    ttl_s: int | None = Field(description="The block's own TTL in seconds (null: its session's, else the server's).")
    expires_at: str | None = Field(description="When the block stops being readable (null: never).")
    updated_at: str | None = Field(description="When it was last updated in place (null: never).")
    prompt_id: str | None = Field(description="The registry prompt that extracts it.")
    prompt_version: int | None
    status: Literal["processing", "ready", "extraction_failed"]
    fail_count: int = Field(description="How many of its extraction attempts failed (an LLM outage's tries are not).")
    last_queued_at: str | None = Field(description="When its extraction was last queued.")


class RetrieverPartOut(BaseModel):
    retriever: str = Field(description="vector or keyword.")
    rank: int = Field(description="The block's 1-based rank among this retriever's candidates.")
    score: float = Field(description="The retriever's own score: cosine (vector) or BM25 (keyword).")
    margin: float = Field(
        description="What this retriever added to the fused score: the score itself when it is the search's only "
        "retriever, its weighted margin above the retriever's lowest candidate relative to its best (score "
        "fusion), or weight / (rrf_k + rank) (reciprocal rank fusion)."
    )


class ExplanationOut(BaseModel):
    """Why a hit ranked where it did. Its score is ``fused`` plus the four gains."""

    retrievers: list[RetrieverPartOut] = Field(description="Each retriever that found the block.")
    fused: float = Field(description="The retrievers' margins summed: the score before context.")
    session_gain: float = Field(description="From the best candidates of the block's session.")
    neighbour_gain: float = Field(description="From the best candidate among its neighbouring exchanges.")
    words_gain: float = Field(description="From its session's rank by the words of the people in it.")
    time_gain: float = Field(description="For an event time inside a window of the query's time phrases.")
    time_phrases: list[str] = Field(description="The query's time phrases whose window holds the block's event time.")
    supersedes: list[str] = Field(description="Ids of older blocks this one restates, which it was moved just above.")


class HitOut(BlockOut):
    """A search hit, as ``memlane search --json`` prints it."""

    score: float = Field(description="Higher is better; what it measures is in score_kind.")
    score_kind: str = Field(
        description="cosine (-1 to 1), bm25 (0 and up), or fusion / rrf: a fused hybrid score that only orders "
        "the hits of one search."
    )
    ranks: dict[str, int] = Field(description="The block's 1-based rank in each retriever that found it.")
    other_perspectives: list[str] = Field(
        description="Ids of the same exchange's blocks from the other perspectives that also matched, folded "
        "into this hit (each exchange is returned once)."
    )
    superseded_by: list[str] = Field(
        default_factory=list,
        description="Ids of newer blocks among this search's candidates that restate what this one says, newest "
        "first: a hint that this hit may be outdated (it is never deleted). Empty when nothing newer restates it.",
    )
    supersedes: list[str] = Field(
        default_factory=list,
        description="Ids of the older blocks this one restates and was moved just above, which is why it can rank "
        "above a hit of a higher score. Empty when it was not moved.",
    )
    explanation: ExplanationOut | None = Field(
        default=None, description="Why it ranked (each retriever's rank and margin, the context gains); with explain."
    )


class AddOut(BaseModel):
    user: str
    conversation_id: str
    session_id: str
    block_ids: list[str]
    exchanges: int
    skipped_system_messages: int
    jobs_enqueued: int
    jobs_done: int = Field(default=0, description="extract=sync: jobs that finished.")
    jobs_failed: int = Field(default=0, description="extract=sync: jobs that failed for good (their blocks are kept).")


class UserOut(BaseModel):
    user: str
    blocks: int
    created_at: str


class UserCreated(BaseModel):
    user: str
    created: bool


class KeyCreated(BaseModel):
    """The only time the key is shown: it is stored hashed."""

    key: str
    key_id: str
    user: str
    label: str
    role: str = "read-write"


class KeyInfo(BaseModel):
    key_id: str
    user: str
    label: str
    created_at: str
    role: str = "read-write"


class UserDeleted(BaseModel):
    user: str
    blocks_deleted: int
    keys_deleted: int


class JobErrorOut(BaseModel):
    job_id: int
    block_id: str
    user: str
    status: str
    attempts: int
    error: str
    at: float


class LLMOutageOut(BaseModel):
    """Queued jobs waiting for an LLM that could not be reached (their attempts kept)."""

    jobs: int
    since: float = Field(description="When the longest-waiting of them first failed (epoch seconds).")
    waiting_s: float = Field(description="How long that is ago.")
    next_try_in_s: float = Field(description="Seconds until the next of them is tried again (0: now).")
    last_error: str


class QueueOut(BaseModel):
    queued: int
    running: int
    done: int
    dead: int
    oldest_queued_age_s: float | None
    throughput_per_min: float
    last_errors: list[JobErrorOut]
    llm_outage: LLMOutageOut | None = Field(
        default=None, description="Set while queued jobs wait for an LLM that could not be reached."
    )


class RequeueIn(Strict):
    """Which failed extraction jobs to run again (every filter given must match)."""

    user: Name | None = None
    since: TimeValue | None = Field(default=None, description="Only jobs that failed (or died) at or after this.")
    block_ids: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = Field(default=None, max_length=10_000)
    dead_only: bool = Field(
        default=False,
        description="Only the dead jobs; by default also the queued jobs waiting out a backoff after a failure.",
    )


class RequeueOut(BaseModel):
    dead: int = Field(description="Dead jobs queued again, their attempts reset and their blocks back to queued.")
    waiting: int = Field(description="Queued jobs that were waiting out a backoff, to be run now.")


class ComponentOut(BaseModel):
    ok: bool
    detail: dict[str, Any] = Field(default_factory=dict)


class HealthOut(BaseModel):
    status: Literal["ok", "unhealthy"]
    store: ComponentOut
    embedder: ComponentOut
    queue: ComponentOut
    llm: ComponentOut | None = Field(
        default=None,
        description="The LLM: configured or not, its model, the jobs waiting for it. Information: never makes "
        "the status unhealthy (extraction waits for the LLM; everything else works without it).",
    )


def queue_out(st: QueueStatus, *, only_user: str | None = None, max_errors: int = 5) -> QueueOut:
    """The queue's state. With ``only_user`` (a user's key), the errors of other users are left out, and
    the errors' texts lose the addresses they name (the LLM server's URL, hosts and ports): a user is told
    what failed, not where the service's machines are."""
    errors = [e for e in st.last_errors if only_user is None or e.user == only_user][:max_errors]

    def shown(text: str) -> str:
        return text if only_user is None else scrub_addresses(text)

    outage = st.llm_outage
    return QueueOut(
        queued=st.queued,
        running=st.running,
        done=st.done,
        dead=st.dead,
        oldest_queued_age_s=st.oldest_queued_age_s,
        throughput_per_min=st.throughput_per_min,
        last_errors=[
            JobErrorOut(
                job_id=e.job_id,
                block_id=e.block_id,
                user=e.user,
                status=e.status.value,
                attempts=e.attempts,
                error=shown(e.error),
                at=e.at,
            )
            for e in errors
        ],
        llm_outage=None
        if outage is None
        else LLMOutageOut(
            jobs=outage.jobs,
            since=outage.since,
            waiting_s=max(0.0, time.time() - outage.since),
            next_try_in_s=outage.next_try_in_s,
            last_error=shown(outage.last_error),
        ),
    )


def add_out(res: AddResult) -> AddOut:
    return AddOut(
        user=res.user,
        conversation_id=res.conversation_id,
        session_id=res.session_id,
        block_ids=list(res.block_ids),
        exchanges=res.exchanges,
        skipped_system_messages=res.skipped_system_messages,
        jobs_enqueued=res.jobs_enqueued,
        jobs_done=res.jobs_done,
        jobs_failed=res.jobs_failed,
    )


def block_out(block: MemoryBlock) -> BlockOut:
    """A block as ``memlane get`` prints it (the CLI's own serializer, so the two cannot drift apart)."""
    return BlockOut.model_validate(block_json(block))


def hit_out(hit: Hit) -> HitOut:
    """A hit as ``memlane search --json`` prints it."""
    return HitOut.model_validate(hit_json(hit))
