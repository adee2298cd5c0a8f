"""Values the client returns: the core's own types where the server sends one, and a few of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from memlane.core.jobs import JobError, JobStatus, LLMOutage, QueueStatus, Requeued
from memlane.core.model import (
    AddResult,
    BlockKind,
    Explanation,
    ExtractionStatus,
    Hit,
    MemoryBlock,
    Page,
    PerspectiveMode,
    Prompt,
    PromptVersion,
    RetrieverPart,
    Session,
    UserInfo,
)
from memlane.core.retention import Policies, RetentionPolicy, RetentionReport, UserRetention

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just created; ``key`` is shown this once (the server keeps only its hash)."""

    key: str
    key_id: str
    user: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: str
    user: str
    label: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class UserDeleted:
    user: str
    blocks_deleted: int
    keys_deleted: int


@dataclass(frozen=True, slots=True)
class ComponentHealth:
    ok: bool
    detail: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Health:
    """``/healthz``: ``ok`` when the store, the embedder and the queue all answered."""

    ok: bool
    store: ComponentHealth
    embedder: ComponentHealth
    queue: ComponentHealth


def block_from_json(d: Mapping[str, Any]) -> MemoryBlock:
    return MemoryBlock(
        id=str(d["block_id"]),
        user=str(d["user"]),
        conversation_id=str(d["conversation_id"]),
        session_id=str(d["session_id"]),
        exchange_index=int(d["exchange_index"]),
        perspective=str(d["perspective"]),
        mode=PerspectiveMode(d["mode"]),
        message=str(d["message"]),
        event_time=datetime.fromisoformat(d["time"]),
        ingest_time=datetime.fromisoformat(d["ingest_time"]),
        time_annotation=str(d["time_annotation"]),
        content_hash=str(d["content_hash"]),
        message_ids=tuple(d["message_ids"]),
        summary=d["summary"],
        contexts=tuple(d["facts"]),
        extraction_status=ExtractionStatus(d["extraction_status"]),
        annotations=dict(d["annotations"]),
        # A server of an older release sends none of the memory model's fields.
        kind=BlockKind(d.get("kind", "exchange")),
        sides=tuple((str(s["role"]), str(s["content"])) for s in d.get("sides", ())),
        ttl_s=d.get("ttl_s"),
        expires_at=_time(d.get("expires_at")),
        updated_at=_time(d.get("updated_at")),
        prompt_id=d.get("prompt_id"),
        prompt_version=d.get("prompt_version"),
        fail_count=int(d.get("fail_count", 0)),
        last_queued_at=_time(d.get("last_queued_at")),
    )


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def hit_from_json(d: Mapping[str, Any]) -> Hit:
    return Hit(
        block=block_from_json(d),
        score=float(d["score"]),
        ranks={str(k): int(v) for k, v in d["ranks"].items()},
        score_kind=str(d.get("score_kind", "fusion")),
        other_perspectives=tuple(d.get("other_perspectives", ())),
        superseded_by=tuple(d.get("superseded_by", ())),
        supersedes=tuple(str(i) for i in d.get("supersedes", ())),
        explanation=None if d.get("explanation") is None else explanation_from_json(d["explanation"]),
    )


def explanation_from_json(d: Mapping[str, Any]) -> Explanation:
    return Explanation(
        retrievers=tuple(
            RetrieverPart(str(p["retriever"]), int(p["rank"]), float(p["score"]), float(p["margin"]))
            for p in d["retrievers"]
        ),
        fused=float(d["fused"]),
        session_gain=float(d["session_gain"]),
        neighbour_gain=float(d["neighbour_gain"]),
        words_gain=float(d["words_gain"]),
        time_gain=float(d["time_gain"]),
        time_phrases=tuple(str(t) for t in d["time_phrases"]),
        supersedes=tuple(str(i) for i in d["supersedes"]),
    )


def add_result_from_json(d: Mapping[str, Any]) -> AddResult:
    return AddResult(
        user=str(d["user"]),
        conversation_id=str(d["conversation_id"]),
        session_id=str(d["session_id"]),
        block_ids=tuple(d["block_ids"]),
        exchanges=int(d["exchanges"]),
        skipped_system_messages=int(d["skipped_system_messages"]),
        jobs_enqueued=int(d["jobs_enqueued"]),
        jobs_done=int(d.get("jobs_done", 0)),
        jobs_failed=int(d.get("jobs_failed", 0)),
    )


def user_from_json(d: Mapping[str, Any]) -> UserInfo:
    return UserInfo(
        name=str(d["user"]),
        blocks=int(d["blocks"]),
        created_at=datetime.fromisoformat(d["created_at"]),
        display_name=d.get("display_name"),
        metadata=dict(d.get("metadata") or {}),
        sessions=int(d.get("sessions", 0)),
        last_activity=_time(d.get("last_activity")),
    )


def session_from_json(d: Mapping[str, Any]) -> Session:
    return Session(
        user=str(d["user"]),
        session_id=str(d["session_id"]),
        conversation_id=str(d["conversation_id"]),
        started_at=datetime.fromisoformat(d["started_at"]),
        ended_at=_time(d["ended_at"]),
        annotations=dict(d["annotations"]),
        metadata=dict(d["metadata"]),
        default_ttl_s=d["default_ttl_s"],
        created_at=datetime.fromisoformat(d["created_at"]),
        blocks=int(d["blocks"]),
    )


def prompt_from_json(d: Mapping[str, Any]) -> Prompt:
    return Prompt(
        prompt_id=str(d["prompt_id"]),
        description=str(d["description"]),
        annotations=dict(d["annotations"]),
        archived=bool(d["archived"]),
        current_version=int(d["current_version"]),
        version_count=int(d["version_count"]),
        updated_at=datetime.fromisoformat(d["updated_at"]),
        text=str(d["text"]),
        created_at=_time(d.get("created_at")),
    )


def prompt_version_from_json(d: Mapping[str, Any]) -> PromptVersion:
    return PromptVersion(
        prompt_id=str(d["prompt_id"]),
        version=int(d["version"]),
        text=str(d["text"]),
        created_at=datetime.fromisoformat(d["created_at"]),
        archived=bool(d["archived"]),
        is_current=bool(d["is_current"]),
    )


def page_from_json(d: Mapping[str, Any], item: Callable[[Mapping[str, Any]], T]) -> Page[T]:
    return Page(
        items=[item(x) for x in d["items"]], total=int(d["total"]), limit=int(d["limit"]), offset=int(d["offset"])
    )


def queue_from_json(d: Mapping[str, Any]) -> QueueStatus:
    return QueueStatus(
        queued=int(d["queued"]),
        running=int(d["running"]),
        done=int(d["done"]),
        dead=int(d["dead"]),
        oldest_queued_age_s=d["oldest_queued_age_s"],
        # The server sends the rate; the core value holds the 5-minute count it came from.
        done_last_5_min=round(float(d["throughput_per_min"]) * 5),
        last_errors=tuple(
            JobError(
                job_id=int(e["job_id"]),
                block_id=str(e["block_id"]),
                user=str(e["user"]),
                status=JobStatus(e["status"]),
                attempts=int(e["attempts"]),
                error=str(e["error"]),
                at=float(e["at"]),
            )
            for e in d["last_errors"]
        ),
        llm_outage=None if not d.get("llm_outage") else outage_from_json(d["llm_outage"]),
    )


def outage_from_json(d: Mapping[str, Any]) -> LLMOutage:
    return LLMOutage(
        jobs=int(d["jobs"]),
        since=float(d["since"]),
        next_try_in_s=float(d["next_try_in_s"]),
        last_error=str(d["last_error"]),
    )


def requeued_from_json(d: Mapping[str, Any]) -> Requeued:
    return Requeued(dead=int(d["dead"]), waiting=int(d["waiting"]))


def health_from_json(d: Mapping[str, Any]) -> Health:
    def part(name: str) -> ComponentHealth:
        c = d[name]
        return ComponentHealth(ok=bool(c["ok"]), detail=dict(c.get("detail", {})))

    return Health(ok=d["status"] == "ok", store=part("store"), embedder=part("embedder"), queue=part("queue"))


def policy_from_json(d: Mapping[str, Any] | None) -> RetentionPolicy | None:
    return None if d is None else RetentionPolicy(max_age_days=d.get("max_age_days"), max_blocks=d.get("max_blocks"))


def report_from_json(d: Mapping[str, Any]) -> RetentionReport:
    users = tuple(
        UserRetention(
            user=u["user"],
            policy=policy_from_json(u["policy"]),
            source=u["source"],
            expired=int(u["expired"]),
            remaining=int(u["remaining"]),
        )
        for u in d["users"]
    )
    return RetentionReport(at=datetime.fromisoformat(d["at"]), dry_run=bool(d["dry_run"]), users=users)


def new_key_from_json(d: Mapping[str, Any]) -> NewKey:
    return NewKey(key=d["key"], key_id=d["key_id"], user=d["user"], label=d["label"])


def key_from_json(d: Mapping[str, Any]) -> KeyInfo:
    return KeyInfo(d["key_id"], d["user"], d["label"], datetime.fromisoformat(d["created_at"]))


def deleted_from_json(d: Mapping[str, Any]) -> UserDeleted:
    return UserDeleted(user=d["user"], blocks_deleted=int(d["blocks_deleted"]), keys_deleted=int(d["keys_deleted"]))


def user_policy_from_json(d: Mapping[str, Any]) -> tuple[RetentionPolicy | None, str]:
    return policy_from_json(d["policy"]), str(d["source"])


def policies_from_json(d: Mapping[str, Any]) -> Policies:
    users = {name: policy_from_json(p) for name, p in d["users"].items()}
    return Policies(default=policy_from_json(d["default"]), users={k: v for k, v in users.items() if v})
