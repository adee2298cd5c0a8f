from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlane.core.errors import ValidationError
from memlane.core.exchanges import (
    MAX_MESSAGE_BYTES,
    build_exchanges,
    draft_blocks,
    merge_turns,
    parse_messages,
    parse_mode,
)
from memlane.core.model import PerspectiveMode

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def msgs(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in pairs]


def test_dual_mode_two_blocks_per_exchange() -> None:
    m = parse_messages(msgs(("user", "hi"), ("assistant", "hello"), ("user", "bye"), ("assistant", "ciao")))
    drafts, n_ex, skipped = draft_blocks(m, PerspectiveMode.DUAL, T0)
    assert n_ex == 2 and skipped == 0
    assert [(d.exchange.index, d.perspective) for d in drafts] == [
        (0, "user"),
        (0, "assistant"),
        (1, "user"),
        (1, "assistant"),
    ]
    assert drafts[0].exchange.text() == "user: hi\nassistant: hello"


def test_single_mode_one_block_per_exchange() -> None:
    m = parse_messages(msgs(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")))
    drafts, n_ex, _ = draft_blocks(m, PerspectiveMode.SINGLE, T0)
    assert n_ex == 2
    assert [d.perspective for d in drafts] == ["exchange", "exchange"]


def test_speakers_mode_one_block_per_speaker() -> None:
    raw = [{"speaker": "Caroline", "text": "I went hiking."}, {"speaker": "Melanie", "text": "Where?"}]
    drafts, _, _ = draft_blocks(parse_messages(raw), PerspectiveMode.SPEAKERS, T0)
    assert [d.perspective for d in drafts] == ["Caroline", "Melanie"]
    assert drafts[0].exchange.text() == "Caroline: I went hiking.\nMelanie: Where?"


def test_speakers_mode_rejects_a_third_speaker() -> None:
    raw = [{"speaker": s, "content": "x"} for s in ("A", "B", "C")]
    with pytest.raises(ValidationError, match="two-person"):
        draft_blocks(parse_messages(raw), PerspectiveMode.SPEAKERS, T0)


def test_consecutive_messages_of_one_role_are_merged_with_their_ids() -> None:
    raw = [
        {"role": "user", "content": "first", "id": "D1:1"},
        {"role": "user", "content": "second", "id": "D1:2"},
        {"role": "assistant", "content": "reply", "id": "D1:3"},
    ]
    turns, _ = merge_turns(parse_messages(raw), PerspectiveMode.DUAL)
    assert len(turns) == 2
    assert turns[0].content == "first\nsecond"
    assert turns[0].message_ids == ("D1:1", "D1:2")
    ex = build_exchanges(turns, PerspectiveMode.DUAL)
    assert ex[0].message_ids == ("D1:1", "D1:2", "D1:3")


def test_trailing_message_without_reply_is_its_own_exchange() -> None:
    m = parse_messages(msgs(("user", "q1"), ("assistant", "a1"), ("user", "q2")))
    drafts, n_ex, _ = draft_blocks(m, PerspectiveMode.DUAL, T0)
    assert n_ex == 2
    assert drafts[-1].exchange.reply is None
    assert drafts[-1].exchange.text() == "user: q2"


def test_leading_assistant_message_stands_alone_in_dual_mode() -> None:
    m = parse_messages(msgs(("assistant", "How can I help?"), ("user", "book a table"), ("assistant", "done")))
    turns, _ = merge_turns(m, PerspectiveMode.DUAL)
    ex = build_exchanges(turns, PerspectiveMode.DUAL)
    assert [e.text() for e in ex] == ["assistant: How can I help?", "user: book a table\nassistant: done"]


def test_system_messages_are_skipped_and_counted() -> None:
    m = parse_messages(msgs(("system", "be nice"), ("user", "hi"), ("assistant", "hello")))
    drafts, n_ex, skipped = draft_blocks(m, PerspectiveMode.DUAL, T0)
    assert skipped == 1 and n_ex == 1
    assert "be nice" not in drafts[0].exchange.text()


def test_only_system_messages_is_an_error() -> None:
    with pytest.raises(ValidationError, match="only system"):
        draft_blocks(parse_messages(msgs(("system", "x"))), PerspectiveMode.DUAL, T0)


def test_message_time_overrides_session_time() -> None:
    raw = [
        {"role": "user", "content": "a", "time": "2023/04/10 (Mon) 23:07"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    drafts, _, _ = draft_blocks(parse_messages(raw), PerspectiveMode.SINGLE, T0)
    assert drafts[0].event_time == datetime(2023, 4, 10, 23, 7, tzinfo=UTC)
    assert drafts[1].event_time == T0


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ([], "messages"),
        ([{"role": "user", "content": "   "}], "messages[0].content"),
        ([{"role": "user", "content": "ok"}, {"role": "user"}], "messages[1].content"),
        ([{"content": "no role"}], "messages[0].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": "x", "time": "not a time"}], "messages[0].time"),
        ([{"role": "user", "content": "x" * (MAX_MESSAGE_BYTES + 1)}], "messages[0].content"),
        (["just a string"], "messages[0]"),
    ],
)
def test_bad_input_names_the_field(raw: list[object], where: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_messages(raw)  # type: ignore[arg-type]
    assert err.value.where == where


def test_named_roles_need_speakers_mode() -> None:
    m = parse_messages([{"role": "Caroline", "content": "hi"}])
    with pytest.raises(ValidationError, match="speakers"):
        draft_blocks(m, PerspectiveMode.DUAL, T0)


def test_unknown_perspective() -> None:
    with pytest.raises(ValidationError, match="unknown perspective 'triple'"):
        parse_mode("triple")


def test_a_date_alone_is_annotated_as_a_date_on_every_block(tmp_path: object) -> None:
    """ "12:00 am on 8 May, 2023" was a clock nobody gave: a session or message time given as a date alone
    is annotated "8 May, 2023" (and still sorts as that day's midnight); a given clock is kept."""
    from pathlib import Path

    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.memory import Memory
    from memlane.core.store.sqlite import SqliteStore

    assert isinstance(tmp_path, Path)
    mem = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder())
    try:
        mem.add("alice", msgs(("user", "I moved to Ghent."), ("assistant", "Nice.")), time="2023-05-08")
        mem.add(
            "alice",
            [
                {"role": "user", "content": "A new job!", "time": "2023/06/02 (Fri)"},
                {"role": "assistant", "content": "Congratulations."},
                {"role": "user", "content": "Starting Monday.", "time": "2023/06/02 (Fri) 18:30"},
            ],
            time="2023-06-01",
        )
        annotated = [(b.message.split("\n")[0], b.time_annotation, b.event_time) for b in mem.list("alice")]
    finally:
        mem.close()
    assert annotated[::2] == [
        ("user: I moved to Ghent.", "8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("user: A new job!", "2 June, 2023", datetime(2023, 6, 2, tzinfo=UTC)),
        ("user: Starting Monday.", "6:30 pm on 2 June, 2023", datetime(2023, 6, 2, 18, 30, tzinfo=UTC)),
    ]
    with pytest.raises(ValidationError, match=r"messages\[0\]\.time: .*2023/06/02 is a Fri, not a Mon"):
        parse_messages([{"role": "user", "content": "x", "time": "2023/06/02 (Mon) 10:00"}])
