"""From messages to exchanges to memory blocks.

Defined behaviour for the awkward cases (each is tested):

* **System messages** are instructions to a model, not something a person said: they are skipped and
  counted in :class:`AddResult.skipped_system_messages`.
* **Consecutive messages from one role** are merged into one turn (joined by a newline); their ids and the
  first one's time are kept.
* **A trailing message with no reply** becomes an exchange of its own (``reply`` is ``None``).
* **Dual mode**: an exchange starts at a user turn and takes the assistant turn after it; an assistant turn
  with no user turn before it (a greeting) is an exchange of its own.
* **Speakers and single mode**: turns pair greedily, the first speaker opens each exchange.
* **Empty content**, an empty list, an unknown role, more than two speakers in speakers mode, a message
  over the size limit, or text that is not valid Unicode (a lone surrogate): :class:`ValidationError`
  naming ``messages[i].field``. Nothing is stored then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlane.core.errors import ValidationError
from memlane.core.model import (
    ASSISTANT_ROLE,
    SYSTEM_ROLE,
    USER_ROLE,
    Exchange,
    Message,
    PerspectiveMode,
    Turn,
)
from memlane.core.names import check_text
from memlane.core.timefmt import coerce_time_of_day

MAX_MESSAGE_BYTES = 64 * 1024
MAX_MESSAGES_PER_ADD = 10_000
MAX_ID_CHARS = 256
EXCHANGE_PERSPECTIVE = "exchange"  # the one block of an exchange in single mode


@dataclass(frozen=True, slots=True)
class BlockDraft:
    """A block before it has an id, an embedding or a store: what ingest hands to the store."""

    exchange: Exchange
    perspective: str
    event_time: datetime
    time_of_day: bool = True  # False: the event time was given as a date alone


def parse_messages(raw: Sequence[Mapping[str, Any] | Message], *, where: str = "messages") -> list[Message]:
    """Validate caller input (dicts as in the JSON API, or :class:`Message`) into messages.

    A dict needs ``content`` (or ``text``) and ``role`` (or ``speaker``); ``time`` and ``id`` are optional.
    """
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        raise ValidationError("expected a list of messages", where=where)
    if not raw:
        raise ValidationError("no messages: an add needs at least one", where=where)
    if len(raw) > MAX_MESSAGES_PER_ADD:
        raise ValidationError(f"{len(raw)} messages; at most {MAX_MESSAGES_PER_ADD} per add", where=where)
    out: list[Message] = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if isinstance(item, Message):
            msg = item
        elif isinstance(item, Mapping):
            msg = _message_from_mapping(item, at)
        else:
            raise ValidationError(f"expected an object, got {type(item).__name__}", where=at)
        _check_message(msg, at)
        out.append(msg)
    return out


def _message_from_mapping(item: Mapping[str, Any], at: str) -> Message:
    role = item.get("role", item.get("speaker"))
    content = item.get("content", item.get("text"))
    if role is None:
        raise ValidationError("missing 'role' (or 'speaker')", where=f"{at}.role")
    if not isinstance(role, str):
        raise ValidationError("must be text", where=f"{at}.role")
    if content is None:
        raise ValidationError("missing 'content' (or 'text')", where=f"{at}.content")
    if not isinstance(content, str):
        raise ValidationError("must be text", where=f"{at}.content")
    msg_id = item.get("id")
    if msg_id is not None and (not isinstance(msg_id, str | int) or isinstance(msg_id, bool)):
        raise ValidationError("must be text", where=f"{at}.id")
    if isinstance(msg_id, int) and msg_id.bit_length() > 64:
        # str() of an int of thousands of digits is slow, or refused (sys.get_int_max_str_digits).
        raise ValidationError("a number id must fit in 64 bits; send long ids as text", where=f"{at}.id")
    time, time_of_day = coerce_time_of_day(item.get("time"), where=f"{at}.time")
    return Message(
        role=role, content=content, time=time, id=None if msg_id is None else str(msg_id), time_of_day=time_of_day
    )


def _check_message(msg: Message, at: str) -> None:
    check_text(msg.role, f"{at}.role")
    check_text(msg.content, f"{at}.content")
    if msg.id is not None:
        check_text(msg.id, f"{at}.id")
    if not msg.role.strip():
        raise ValidationError("empty role", where=f"{at}.role")
    if len(msg.role) > MAX_ID_CHARS:
        raise ValidationError(f"role longer than {MAX_ID_CHARS} characters", where=f"{at}.role")
    if not msg.content.strip():
        raise ValidationError("empty content", where=f"{at}.content")
    size = len(msg.content.encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise ValidationError(
            f"{size} bytes; the limit is {MAX_MESSAGE_BYTES} bytes per message", where=f"{at}.content"
        )
    if msg.id is not None and len(msg.id) > MAX_ID_CHARS:
        raise ValidationError(f"longer than {MAX_ID_CHARS} characters", where=f"{at}.id")


def merge_turns(messages: Sequence[Message], mode: PerspectiveMode) -> tuple[list[Turn], int]:
    """Drop system messages and merge runs of one role. Returns the turns and the number skipped."""
    turns: list[Turn] = []
    skipped = 0
    for i, msg in enumerate(messages):
        role = msg.role.strip()
        if role.lower() == SYSTEM_ROLE:
            skipped += 1
            continue
        if mode is not PerspectiveMode.SPEAKERS:
            role = role.lower()
            if role not in (USER_ROLE, ASSISTANT_ROLE):
                raise ValidationError(
                    f"role {msg.role!r} is not user/assistant/system; use perspective 'speakers' for named speakers",
                    where=f"messages[{i}].role",
                )
        ids = (msg.id,) if msg.id is not None else ()
        if turns and turns[-1].role == role:
            prev = turns[-1]
            first = prev if prev.time is not None else msg  # the first time given is the turn's
            turns[-1] = Turn(
                role, prev.content + "\n" + msg.content, first.time, prev.message_ids + ids, first.time_of_day
            )
        else:
            turns.append(Turn(role, msg.content, msg.time, ids, msg.time_of_day))
    if mode is PerspectiveMode.SPEAKERS:
        speakers = list(dict.fromkeys(t.role for t in turns))
        if len(speakers) > 2:
            raise ValidationError(
                f"speakers mode takes a two-person chat; found {len(speakers)} speakers: {speakers}",
                where="messages",
            )
    if not turns:
        raise ValidationError("only system messages: nothing to remember", where="messages")
    return turns, skipped


def build_exchanges(turns: Sequence[Turn], mode: PerspectiveMode) -> list[Exchange]:
    """Pair turns into exchanges following the module's rules."""
    out: list[Exchange] = []
    i = 0
    while i < len(turns):
        first = turns[i]
        nxt = turns[i + 1] if i + 1 < len(turns) else None
        pairs = nxt is not None and (
            first.role == USER_ROLE if mode is PerspectiveMode.DUAL else nxt.role != first.role
        )
        out.append(Exchange(index=len(out), first=first, reply=nxt if pairs else None))
        i += 2 if pairs else 1
    return out


def perspectives(exchange: Exchange, mode: PerspectiveMode) -> list[str]:
    """The perspectives (points of view) an exchange yields blocks for."""
    if mode is PerspectiveMode.DUAL:
        return [USER_ROLE, ASSISTANT_ROLE]
    if mode is PerspectiveMode.SPEAKERS:
        return list(exchange.speakers)
    return [EXCHANGE_PERSPECTIVE]


def draft_blocks(
    messages: Sequence[Message], mode: PerspectiveMode, session_time: datetime, *, session_time_of_day: bool = True
) -> tuple[list[BlockDraft], int, int]:
    """Messages to block drafts. Returns (drafts, number of exchanges, system messages skipped).

    An exchange's event time is the time of its first message if given, else the session time
    (``session_time_of_day``: False when that was given as a date alone).
    """
    turns, skipped = merge_turns(messages, mode)
    exchanges = build_exchanges(turns, mode)
    drafts = [
        BlockDraft(
            exchange=ex,
            perspective=p,
            event_time=ex.first.time or session_time,
            time_of_day=ex.first.time_of_day if ex.first.time is not None else session_time_of_day,
        )
        for ex in exchanges
        for p in perspectives(ex, mode)
    ]
    return drafts, len(exchanges), skipped


def parse_mode(value: str | PerspectiveMode) -> PerspectiveMode:
    """The perspective mode named by ``value``, or a ValidationError listing the valid ones."""
    try:
        return PerspectiveMode(value)
    except ValueError:
        valid = ", ".join(m.value for m in PerspectiveMode)
        raise ValidationError(f"unknown perspective {value!r}; expected one of {valid}", where="perspective") from None
