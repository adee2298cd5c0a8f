"""How a haystack's history becomes add requests, and how retrieved blocks map back to turns and sessions.

Ingest (one :class:`AddRequest` per session, user = the namespace, time = the session date):

* message ids are the data set's turn ids (LoCoMo ``dia_id``, LongMemEval ``<session_id>_<i>``), so every
  block carries the ids of the turns it holds (``MemoryBlock.message_ids``);
* a turn's text is its family's (:meth:`~memlane.bench.datasets.families.Family.turn_text`): LoCoMo turns
  with a shared image get the official rendering of the caption appended (``<text> and shared
  <blip_caption>.``), the caption often being the only place the fact is stated;
* empty turns are dropped and turns over the core's size limit truncated (both noted): the core rejects
  them, and one bad turn must not keep a whole session out of the store;
* turns with the roles user and assistant (LongMemEval) in ``single``/``speakers`` mode: the core pairs turns
  greedily from the first one, so a session that opens with assistant turns would pair every user turn with
  the *preceding* assistant turn. Those leading assistant turns go in a request of their own, which gives the
  exchange boundaries of dual mode (an exchange starts at a user turn).

Rankings: a block's turn ids are filtered to the *target* turns of the family (``Family.is_target``:
LongMemEval's user turns, the official corpus of turn-level retrieval; LoCoMo's every dia_id, both speakers
being users), then de-duplicated in rank order. Session rankings follow the blocks' sessions in rank order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane.bench.datasets.model import Haystack, Session
from memlane.core.exchanges import MAX_MESSAGE_BYTES
from memlane.core.memory import AddRequest
from memlane.core.model import MemoryBlock, PerspectiveMode

if TYPE_CHECKING:
    # Only for annotations: the families import the QA context, which imports this module.
    from memlane.bench.datasets.families import Family

# Bump when the way histories become add requests changes, or what the store makes of them: stores built
# the old way are then not reused. 2: exchange indexes continue across the adds of one session (a LongMemEval
# session whose leading assistant turns go in an add of their own used to number both adds from 0).
INGEST_FORMAT = 2


def resolve_perspective(family: Family, perspective: str) -> PerspectiveMode:
    """``auto`` -> the family's default (:attr:`Family.perspective`), otherwise the named mode."""
    if perspective == "auto":
        return family.perspective
    return PerspectiveMode(perspective)


def blocks_per_exchange(mode: PerspectiveMode) -> int:
    """Blocks an exchange yields (two-person chats in speakers mode)."""
    return 1 if mode is PerspectiveMode.SINGLE else 2


def _fit(text: str) -> str:
    """Cut to the core's per-message limit without splitting a UTF-8 character."""
    return text.encode("utf-8")[:MAX_MESSAGE_BYTES].decode("utf-8", errors="ignore")


def session_messages(session: Session, family: Family, where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The session's turns as message dicts (role, content, id), with a note per dropped or cut turn."""
    messages: list[dict[str, Any]] = []
    notes: list[str] = []
    for turn in session.turns:
        text = family.turn_text(turn)
        if not text.strip():
            notes.append(f"{where}: empty turn {turn.turn_id} dropped")
            continue
        if len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:
            notes.append(f"{where}: turn {turn.turn_id} cut to {MAX_MESSAGE_BYTES} bytes")
            text = _fit(text)
        messages.append({"role": turn.role, "content": text, "id": turn.turn_id})
    return messages, notes


def _split_leading_assistant(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), 0)
    if first_user == 0:
        return [messages]
    return [messages[:first_user], messages[first_user:]]


def haystack_requests(
    haystack: Haystack, family: Family, perspective: PerspectiveMode
) -> tuple[list[AddRequest], list[str]]:
    """Add requests for the whole history of ``haystack`` (see the module doc), and the notes."""
    requests: list[AddRequest] = []
    notes: list[str] = []
    for session in haystack.sessions:
        messages, session_notes = session_messages(session, family, f"{haystack.namespace}/{session.session_id}")
        notes.extend(session_notes)
        if not messages:
            notes.append(f"{haystack.namespace}/{session.session_id}: no turns left, session skipped")
            continue
        parts = [messages]
        if family.user_assistant and perspective is not PerspectiveMode.DUAL:
            parts = _split_leading_assistant(messages)
        for part in parts:
            requests.append(
                AddRequest(
                    user=haystack.namespace,
                    messages=part,
                    conversation_id=haystack.namespace,
                    session_id=session.session_id,
                    time=session.started_at,
                    perspective=perspective,
                )
            )
    return requests, notes


@dataclass(frozen=True)
class HaystackIndex:
    """What rankings of one namespace are made of: its sessions and target turns, in haystack order."""

    namespace: str
    session_ids: tuple[str, ...]
    turn_ids: tuple[str, ...]
    session_dates: Mapping[str, datetime | None] = field(default_factory=dict)

    @classmethod
    def of(cls, haystack: Haystack, family: Family) -> HaystackIndex:
        """Target turns: user turns for LongMemEval, every turn for LoCoMo (:meth:`Family.is_target`)."""
        turns = [t for s in haystack.sessions for t in s.turns if family.is_target(t)]
        return cls(
            namespace=haystack.namespace,
            session_ids=tuple(s.session_id for s in haystack.sessions),
            turn_ids=tuple(t.turn_id for t in turns),
            session_dates={s.session_id: s.started_at for s in haystack.sessions},
        )


@dataclass(frozen=True)
class Rankings:
    """Session and turn rankings of one question; the first ``retrieved_*`` entries came from the search,
    the rest is padding (see :func:`rank`)."""

    session_ids: tuple[str, ...]
    turn_ids: tuple[str, ...]
    retrieved_sessions: int
    retrieved_turns: int


def pad(ranked: Sequence[str], pool: Sequence[str], length: int) -> tuple[str, ...]:
    """``ranked`` (kept whole), then the items of ``pool`` it lacks, in pool order, until ``length`` items."""
    out = list(ranked)
    seen = set(out)
    for item in pool:
        if len(out) >= length:
            break
        if item not in seen:
            out.append(item)
            seen.add(item)
    return tuple(out)


def rank(blocks: Iterable[MemoryBlock], index: HaystackIndex, min_length: int) -> Rankings:
    """Rankings implied by blocks in rank order, padded to ``min_length`` (or the whole haystack).

    Padding appends the namespace's remaining sessions / target turns in haystack order: what a ranker
    that scores them all zero returns (the official flat-bm25 baseline does the same), and it keeps every
    exported list at the contract's length.
    """
    targets = set(index.turn_ids)
    sessions: list[str] = []
    turns: list[str] = []
    seen_sessions: set[str] = set()
    seen_turns: set[str] = set()
    for block in blocks:
        if block.session_id not in seen_sessions:
            seen_sessions.add(block.session_id)
            sessions.append(block.session_id)
        for turn_id in block.message_ids:
            if turn_id in targets and turn_id not in seen_turns:
                seen_turns.add(turn_id)
                turns.append(turn_id)
    return Rankings(
        session_ids=pad(sessions, index.session_ids, min(min_length, len(index.session_ids))),
        turn_ids=pad(turns, index.turn_ids, min(min_length, len(index.turn_ids))),
        retrieved_sessions=len(sessions),
        retrieved_turns=len(turns),
    )
