"""The add path, written once: what is added becomes blocks, which are embedded (the embedding cache
first), written with their extraction jobs in one transaction per add, extracted at once when asked, and
reported as an :class:`AddResult`.

Three kinds of input come in: messages (``Memory.add``, ``add_many``: exchanges drafted per perspective by
``memlane.core.exchanges``), facts (``add_facts``) and exchanges given as their two sides
(``add_exchanges``). Each is checked and turned into a :class:`Draft`; :meth:`Ingest.write` does the rest
for all of them (docs/design/004-architecture.md, "The path of one add").
"""

from __future__ import annotations

import builtins
import dataclasses
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from time import monotonic, time_ns
from typing import Any

from memlane.core.bounds import MAX_PERIOD_S, MAX_ROW_ID, check_int, check_seconds
from memlane.core.errors import ConfigError, LLMError, PromptArchivedError, QueueFullError, ValidationError
from memlane.core.exchanges import EXCHANGE_PERSPECTIVE, BlockDraft, draft_blocks, parse_messages, parse_mode
from memlane.core.jobs import JobStatus
from memlane.core.model import (
    ASSISTANT_ROLE,
    USER_ROLE,
    AddResult,
    BlockKind,
    ExtractionStatus,
    ExtractMode,
    MemoryBlock,
    Message,
    PerspectiveMode,
    Rejected,
    content_hash,
)
from memlane.core.model_checks import check_annotations, check_prompt_ref, check_ttl
from memlane.core.names import check_name, check_text
from memlane.core.services import BlockService
from memlane.core.store.blocks import BlockWrite
from memlane.core.store.prompts import Prompts
from memlane.core.timefmt import annotate, coerce_time_of_day, now_utc

DEFAULT_CONVERSATION = "default"
DEFAULT_SESSION = "default"
FACT_PERSPECTIVE = "fact"
# The per-block token limit counts tokens as about four bytes of UTF-8 each: an estimate without a tokenizer.
BYTES_PER_TOKEN = 4

# Runs extraction jobs now (Memory.run_jobs): the job ids, a timeout and who hears of each LLM error.
RunJobs = Callable[..., dict[int, JobStatus]]
# A fact or an exchange to store: its perspective, its text, its sides (an exchange's two, as given).
Item = tuple[str, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class AddRequest:
    """One ``add`` call as a value, for :meth:`Memory.add_many`."""

    user: str
    messages: Sequence[Mapping[str, Any] | Message]
    conversation_id: str = DEFAULT_CONVERSATION
    session_id: str = DEFAULT_SESSION
    time: datetime | str | float | None = None
    perspective: str | PerspectiveMode = PerspectiveMode.DUAL
    # Free string annotations kept on every block of the add (integrations keep their metadata here).
    annotations: Mapping[str, str] | None = None
    # The blocks' own TTL in seconds (None: the session's default, else the server's; 0: never).
    ttl_s: int | None = None
    # The registry prompt (id, version or None for its current one) that extracts the blocks.
    prompt: tuple[str, int | None] | str | None = None


@dataclass(frozen=True, slots=True)
class Draft:
    """One add, checked and made into blocks: what :meth:`Ingest.write` embeds, writes and reports."""

    user: str
    conversation_id: str
    session_id: str
    blocks: builtins.list[MemoryBlock]
    exchanges: int
    skipped_system_messages: int = 0
    rejected: tuple[Rejected, ...] = ()


def new_block_id() -> str:
    """Time-ordered, unguessable: 12 hex digits of milliseconds, then 10 random hex digits."""
    return f"{time_ns() // 1_000_000:012x}{secrets.token_hex(5)}"


def estimate_tokens(text: str) -> int:
    """A text's tokens as the per-block limit counts them (about four bytes of UTF-8 each)."""
    return math.ceil(len(text.encode("utf-8", "replace")) / BYTES_PER_TOKEN)


def exchange_text(user_content: str, assistant_content: str) -> str:
    """An exchange's display text from its two sides (a side that is empty is left out)."""
    lines = [f"{USER_ROLE}: {user_content}"] if user_content else []
    if assistant_content:
        lines.append(f"{ASSISTANT_ROLE}: {assistant_content}")
    return "\n".join(lines)


def check_side_pair(pair: object, where: str) -> tuple[str, str]:
    """An exchange's (user_content, assistant_content): strings, not both empty."""
    if not isinstance(pair, tuple | list) or len(pair) != 2:
        raise ValidationError("must be a (user_content, assistant_content) pair", where=where)
    user_content, assistant_content = pair
    if not isinstance(user_content, str) or not isinstance(assistant_content, str):
        raise ValidationError("both sides are strings ('' for a missing side)", where=where)
    if not user_content.strip() and not assistant_content.strip():
        raise ValidationError("at least one side must have content", where=where)
    return check_text(user_content, f"{where}[0]"), check_text(assistant_content, f"{where}[1]")


def check_extract(extract: object, llm: object) -> ExtractMode:
    """The extraction mode of an add: ``off``, ``async`` or ``sync`` (which needs an LLM)."""
    if extract not in ("off", "async", "sync"):
        raise ValidationError(f"extract must be off, async or sync, not {extract!r}", where="extract")
    if extract == "sync" and llm is None:
        raise ConfigError("extract='sync' needs an LLM (Memory(..., llm=...) or --llm)")
    return extract


def resolve_prompt(store: Prompts, prompt: object, where: str = "prompt") -> tuple[str | None, int | None]:
    """The registry prompt an add or update names, as (id, version): NotFoundError for an unknown one,
    PromptArchivedError for an archived one."""
    ref = check_prompt_ref(prompt, where)
    if ref is None:
        return None, None
    found = store.get_prompt_version(*ref)
    if found.archived:
        raise PromptArchivedError(found.prompt_id, found.version)
    return found.prompt_id, found.version


def _check_annotations(value: Mapping[str, str] | None, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("must be a mapping of strings to strings", where=where)
    for key, text in value.items():
        if not isinstance(key, str) or not isinstance(text, str):
            raise ValidationError(f"keys and values must be strings, not {key!r}: {text!r}", where=where)
        check_text(key, where)
        check_text(text, where)
    return dict(value)


def _limits(max_tokens: int | None, max_queued: int | None) -> tuple[int | None, int | None]:
    tokens = None if max_tokens is None else check_int(max_tokens, "max_tokens", 1, MAX_ROW_ID)
    return tokens, None if max_queued is None else check_int(max_queued, "max_queued", 0, MAX_ROW_ID)


@dataclass(eq=False)
class Ingest(BlockService):
    """The add path of one memory (see the module)."""

    run_jobs: RunJobs
    # The embedding cache is another store's: its entries are written there, not in the add's transaction.
    shared_cache: bool = field(kw_only=True)

    def add_many(
        self, requests: Sequence[AddRequest], *, extract: ExtractMode = "off", epoch: int | None = None
    ) -> builtins.list[AddResult]:
        """Several adds with one batched embedding pass: the bulk-ingest path.

        All requests are validated before anything is written; each request is then written in its own
        transaction, so a crash keeps whole adds only. A request whose user was deleted after ``epoch``
        (by default: after this call began) raises UserDeletedError; the requests before it are stored.
        """
        # Read before the slow part (validation, embedding): a deletion after this point refuses the write.
        since = self.store.deletion_epoch() if epoch is None else check_int(epoch, "epoch", 0, MAX_ROW_ID)
        mode = check_extract(extract, self.settings.llm)
        status = ExtractionStatus.OFF if mode == "off" else ExtractionStatus.QUEUED
        drafts = [self._messages(i, r, status) for i, r in enumerate(requests)]
        return self.write(drafts, mode, since)

    def add_facts(
        self,
        user: str,
        facts: Sequence[str],
        *,
        session_id: str = DEFAULT_SESSION,
        conversation_id: str = DEFAULT_CONVERSATION,
        time: datetime | str | float | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
        extract: ExtractMode | None = None,
        sync_timeout_s: float | None = None,
        max_tokens: int | None = None,
        max_queued: int | None = None,
    ) -> AddResult:
        """One FACT block per fact, in one transaction (``time``: their event time, default now).
        ``sync_timeout_s``: how long ``extract="sync"`` may take, from the call, the LLM client's retries and
        waits included; the jobs not finished by then stay queued for a worker (:class:`AddResult` says
        so: ``jobs_done``, ``extraction_error``).

        ``max_tokens``: the per-block token limit (about four bytes of UTF-8 a token): a fact over it is
        left out, the others stored, and :attr:`AddResult.rejected` says which. ``max_queued``: when the add
        queues extraction (``"async"``) and the queue would then hold more than this many jobs,
        QueueFullError, nothing written."""
        started = monotonic()
        if isinstance(facts, str) or not isinstance(facts, Sequence):
            raise ValidationError("must be a list of facts, not one string", where="facts")
        if not facts:
            raise ValidationError("no facts given", where="facts")
        tokens, queued = _limits(max_tokens, max_queued)
        rejected = _over(tokens, [f if isinstance(f, str) else "" for f in facts])
        items: builtins.list[Item] = []
        for i, fact in enumerate(facts):
            if any(r.index == i for r in rejected):
                continue
            if not isinstance(fact, str) or not fact.strip():
                raise ValidationError("a fact is non-empty text", where=f"facts[{i}]")
            items.append((FACT_PERSPECTIVE, check_text(fact, f"facts[{i}]"), ()))
        return self._items(
            user, BlockKind.FACT, items, session_id, conversation_id, time, annotations, ttl_s, prompt,
            extract, sync_timeout_s, queued, rejected, started,
        )  # fmt: skip

    def add_exchanges(
        self,
        user: str,
        pairs: Sequence[tuple[str, str]],
        *,
        session_id: str = DEFAULT_SESSION,
        conversation_id: str = DEFAULT_CONVERSATION,
        time: datetime | str | float | None = None,
        annotations: Mapping[str, str] | None = None,
        ttl_s: int | None = None,
        prompt: tuple[str, int | None] | str | None = None,
        extract: ExtractMode | None = None,
        sync_timeout_s: float | None = None,
        max_tokens: int | None = None,
        max_queued: int | None = None,
    ) -> AddResult:
        """One EXCHANGE block per (user_content, assistant_content) pair, its two sides kept as given
        (either may be "" but not both); one perspective per exchange (single mode). ``sync_timeout_s``,
        ``max_tokens`` (counted on the two sides, a newline between them) and ``max_queued``: as
        :meth:`add_facts`'s."""
        started = monotonic()
        if isinstance(pairs, str) or not isinstance(pairs, Sequence):
            raise ValidationError("must be a list of (user_content, assistant_content) pairs", where="pairs")
        if not pairs:
            raise ValidationError("no exchanges given", where="pairs")
        tokens, queued = _limits(max_tokens, max_queued)
        rejected = _over(tokens, [_sides_text(p) for p in pairs])
        items: builtins.list[Item] = []
        for i, pair in enumerate(pairs):
            if any(r.index == i for r in rejected):
                continue
            u, a = check_side_pair(pair, f"pairs[{i}]")
            items.append((EXCHANGE_PERSPECTIVE, exchange_text(u, a), ((USER_ROLE, u), (ASSISTANT_ROLE, a))))
        return self._items(
            user, BlockKind.EXCHANGE, items, session_id, conversation_id, time, annotations, ttl_s, prompt,
            extract, sync_timeout_s, queued, rejected, started,
        )  # fmt: skip

    def write(
        self, drafts: Sequence[Draft], extract: ExtractMode, since: int, *, deadline: float | None = None
    ) -> builtins.list[AddResult]:
        """Embed every draft's blocks in one pass, then write each draft in its own transaction (its blocks,
        keys, vectors, cache entries and, unless ``extract`` is off, one extraction job per block), run its
        jobs now when ``extract`` is ``"sync"`` (until ``deadline``, a :func:`time.monotonic` instant), and
        report it. ``since``: the deletion epoch read when the add began."""
        texts = [b.message for d in drafts for b in d.blocks]
        vectors, new_cache = self.embedder.embed_deferred(texts)
        if self.shared_cache and new_cache:
            self.embedder.cache.put_vectors(self.embedder.model_id, new_cache)
            new_cache = {}
        results: builtins.list[AddResult] = []
        offset = 0
        for d in drafts:
            # The embedding-cache entries ride along with the first write: one commit, not two.
            cache_entries, new_cache = new_cache, {}
            how = BlockWrite(
                (self.embedder.model_id, cache_entries),
                enqueue_attempts=0 if extract == "off" else self.settings.max_attempts,
                epoch=since,
                default_ttl_s=self.settings.default_ttl_s,
            )
            job_ids = self.store.write_blocks(d.user, d.blocks, vectors[offset : offset + len(d.blocks)], how)
            offset += len(d.blocks)
            errors: builtins.list[LLMError] = []
            outcome: dict[int, JobStatus] = {}
            if extract == "sync":
                left = None if deadline is None else max(0.0, deadline - monotonic())
                outcome = self.run_jobs(job_ids, timeout_s=left, on_error=errors.append)
            results.append(_result(d, job_ids, outcome, errors))
        return results

    def _messages(self, i: int, req: AddRequest, status: ExtractionStatus) -> Draft:
        """A request of :meth:`add_many`, checked (fields named ``requests[i].`` from the second on)."""
        where = f"requests[{i}]" if i else None

        def at(field: str) -> str:
            return f"{where}.{field}" if where else field

        check_name(req.user, at("user"))
        check_name(req.conversation_id, at("conversation_id"))
        check_name(req.session_id, at("session_id"))
        mode = parse_mode(req.perspective)
        messages = parse_messages(req.messages, where=at("messages"))
        ingest_time = now_utc()
        given, time_of_day = coerce_time_of_day(req.time, where=at("time"))
        drafts, exchanges, skipped = draft_blocks(messages, mode, given or ingest_time, session_time_of_day=time_of_day)
        annotations = _check_annotations(req.annotations, at("annotations"))
        ttl = check_ttl(req.ttl_s, at("ttl_s"))
        prompt_id, prompt_version = resolve_prompt(self.store, req.prompt, at("prompt"))
        blocks = [
            dataclasses.replace(
                _block(req, mode, d, ingest_time, status, annotations),
                ttl_s=ttl,
                prompt_id=prompt_id,
                prompt_version=prompt_version,
            )
            for d in drafts
        ]
        return Draft(req.user, req.conversation_id, req.session_id, blocks, exchanges, skipped)

    def _items(
        self,
        user: str,
        kind: BlockKind,
        items: Sequence[Item],
        session_id: str,
        conversation_id: str,
        time: datetime | str | float | None,
        annotations: Mapping[str, str] | None,
        ttl_s: int | None,
        prompt: object,
        extract: ExtractMode | None,
        sync_timeout_s: float | None,
        max_queued: int | None,
        rejected: tuple[Rejected, ...],
        started: float,
    ) -> AddResult:
        """Facts or exchanges (``items``, those under the token limit), checked, made into one add."""
        # The synchronous extraction's time counts from the call: the embedding and the write come out of it.
        deadline = None
        if sync_timeout_s is not None:
            deadline = started + check_seconds(sync_timeout_s, "sync_timeout_s", 0, MAX_PERIOD_S)
        check_name(user, "user")
        check_name(session_id, "session_id")
        check_name(conversation_id, "conversation_id")
        mode = check_extract("off" if extract is None else extract, self.settings.llm)
        labels = check_annotations(annotations, "annotations") or {}
        ttl = check_ttl(ttl_s, "ttl_s")
        since = self.store.deletion_epoch()
        prompt_id, prompt_version = resolve_prompt(self.store, prompt)
        ingest = now_utc()
        given, time_of_day = coerce_time_of_day(time, where="time")
        event = given or ingest
        status = ExtractionStatus.OFF if mode == "off" else ExtractionStatus.QUEUED
        blocks = [
            MemoryBlock(
                id=new_block_id(),
                user=user,
                conversation_id=conversation_id,
                session_id=session_id,
                exchange_index=i,
                perspective=perspective,
                mode=PerspectiveMode.SINGLE,
                message=text,
                event_time=event,
                ingest_time=ingest,
                time_annotation=annotate(event, time_of_day=time_of_day),
                content_hash=content_hash(text),
                extraction_status=status,
                annotations=dict(labels),
                kind=kind,
                sides=sides,
                ttl_s=ttl,
                prompt_id=prompt_id,
                prompt_version=prompt_version,
            )
            for i, (perspective, text, sides) in enumerate(items)
        ]
        draft = Draft(user, conversation_id, session_id, blocks, len(blocks), rejected=rejected)
        if not blocks:  # every item was over the token limit: nothing to write
            return _result(draft, [], {}, [])
        if mode == "async" and max_queued is not None:
            waiting = self.queue.status(recent_errors=0).queued
            if waiting + len(blocks) > max_queued:
                raise QueueFullError(waiting, max_queued)
        (result,) = self.write([draft], mode, since, deadline=deadline)
        return result


def _sides_text(pair: object) -> str:
    """What the token limit counts of an exchange: its two sides as given, a newline between them."""
    if isinstance(pair, tuple | list) and len(pair) == 2 and all(isinstance(s, str) for s in pair):
        return f"{pair[0]}\n{pair[1]}"
    return ""


def _over(limit: int | None, texts: Sequence[str]) -> tuple[Rejected, ...]:
    if limit is None:
        return ()
    counts = [estimate_tokens(t) for t in texts]
    return tuple(Rejected(i, n, limit) for i, n in enumerate(counts) if n > limit)


def _block(
    req: AddRequest,
    mode: PerspectiveMode,
    d: BlockDraft,
    ingest_time: datetime,
    status: ExtractionStatus,
    annotations: dict[str, str],
) -> MemoryBlock:
    text = d.exchange.text()
    return MemoryBlock(
        id=new_block_id(),
        user=req.user,
        conversation_id=req.conversation_id,
        session_id=req.session_id,
        exchange_index=d.exchange.index,
        perspective=d.perspective,
        mode=mode,
        message=text,
        event_time=d.event_time,
        ingest_time=ingest_time,
        time_annotation=annotate(d.event_time, time_of_day=d.time_of_day),
        content_hash=content_hash(text),
        message_ids=d.exchange.message_ids,
        extraction_status=status,
        annotations=dict(annotations),
    )


def _result(
    d: Draft, job_ids: Sequence[int], outcome: Mapping[int, JobStatus], errors: Sequence[LLMError]
) -> AddResult:
    done = sum(s is JobStatus.DONE for s in outcome.values())
    return AddResult(
        user=d.user,
        conversation_id=d.conversation_id,
        session_id=d.session_id,
        block_ids=tuple(b.id for b in d.blocks),
        exchanges=d.exchanges,
        skipped_system_messages=d.skipped_system_messages,
        jobs_enqueued=len(job_ids),
        jobs_done=done,
        jobs_failed=sum(s is JobStatus.DEAD for s in outcome.values()),
        extraction_error=str(errors[-1]) if errors and done < len(job_ids) else None,
        rejected=d.rejected,
    )
