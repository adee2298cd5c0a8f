"""Times at the ends of the calendar: refused with the field named (Python API, HTTP 422, CLI exit 2, MCP
tool error), never an OverflowError; and anything accepted is stored, read back and searched on both
engines. The accepted range is 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in UTC."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_support import Service, make_service
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redteam_support import assert_clean_refusal, run_cli, store_content

from mcp import Client
from memlane.bench.retrieval.run import end_of_day
from memlane.core.errors import ValidationError
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.core.timefmt import MAX_EPOCH, MIN_EPOCH
from memlane.interfaces.mcp import build_server

# Each broke something deep in core/timefmt.py (OverflowError, ValueError) before the range was checked.
OUT_OF_RANGE: list[Any] = [
    "0001-01-01T00:00:00+05:00",  # year 0 in UTC
    "9999-12-31T23:59:59-05:00",  # year 10000 in UTC
    "9999-12-31T23:59:59.999999Z",  # stores as 253402300800.0, which read back as year 10000
    "0001-01-01T00:00:00+23:59",
    1e20,
    -1e20,
    float("nan"),
    float("inf"),
    float("-inf"),
    10**30,
    -(10**400),
    MAX_EPOCH + 1,
    MIN_EPOCH - 1,
    253402300799.9999999,  # rounds to 253402300800.0
]
AT_THE_ENDS = ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00-05:00", "9999-12-31T23:59:59Z", MIN_EPOCH, MAX_EPOCH]
MESSAGE = [{"role": "user", "content": "I planted an oak."}, {"role": "assistant", "content": "Lovely."}]


@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=repr)
def test_out_of_range_times_are_refused_naming_the_field(memory: Memory, value: Any) -> None:
    with pytest.raises(ValidationError) as err:
        memory.add("alice", MESSAGE, time=value)
    assert err.value.where == "time" and "out of range" in str(err.value)
    with pytest.raises(ValidationError) as err:
        memory.add("alice", [{**MESSAGE[0], "time": value}])
    assert err.value.where == "messages[0].time"
    memory.add("alice", MESSAGE)
    for field in ("before", "after", "at"):
        with pytest.raises(ValidationError) as err:
            memory.search("alice", "oak", **{field: value})
        assert err.value.where == field
    assert len(memory.list("alice")) == 2  # nothing of the refused adds was stored


@pytest.mark.parametrize("value", AT_THE_ENDS, ids=repr)
def test_times_at_the_ends_are_stored_read_back_and_searched(memory: Memory, value: Any) -> None:
    added = memory.add("alice", MESSAGE, time=value, session_id="s")
    block = memory.get("alice", added.block_ids[0])
    assert block.event_time.year in (1, 9999) and block.time_annotation.endswith((", 1", ", 9999"))
    assert [b.id for b in memory.list("alice")] == list(added.block_ids)
    for field in ("before", "after", "at"):
        memory.search("alice", "what did I plant two weeks ago", **{field: value})
    hits = memory.search("alice", "oak", after=block.event_time, mode="keyword", distinct=False)
    assert {h.block.id for h in hits} == set(added.block_ids)


def test_a_block_stored_a_second_past_the_end_stays_readable(tmp_path: Path) -> None:
    """Before the range was checked, 23:59:59.999999 on 31 December 9999 was stored as epoch
    253402300800.0, and reading it back failed for the whole user ("year 10000 is out of range")."""
    mem = Memory.open(tmp_path / "old.db", embedder="hashing")
    try:
        added = mem.add("alice", MESSAGE, time="9999-12-31T23:59:59Z")
        assert isinstance(mem.store, SqliteStore)
        with mem.store.transaction() as conn:  # the row as the code before the range check stored it
            conn.execute("UPDATE blocks SET event_ts = 253402300800.0")
        blocks = mem.list("alice")
        assert [b.id for b in blocks] == list(added.block_ids)
        assert blocks[0].event_time == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    finally:
        mem.close()


def test_the_question_day_of_the_last_day_has_no_end() -> None:
    assert end_of_day(datetime(9999, 12, 31, 18, 0, tzinfo=UTC)) is None
    assert end_of_day(datetime(2023, 5, 8, 18, 0, tzinfo=UTC)) == datetime(2023, 5, 9, tzinfo=UTC)


# -- the property: accepted exactly when the UTC instant is in range, and then usable everywhere ------------

offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
near_ends = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(1, 1, 3)),
    st.datetimes(min_value=datetime(9999, 12, 29), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)),
    st.datetimes(),
)


def utc_microseconds(local: datetime, offset: timezone) -> int:
    """The instant in microseconds since year 1, by integer arithmetic (no datetime range involved)."""
    delta = local - datetime(1, 1, 1)
    shift = offset.utcoffset(None)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds - shift // timedelta(microseconds=1)


LAST_SECOND = utc_microseconds(datetime(9999, 12, 31, 23, 59, 59), UTC)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(local=near_ends, offset=offsets, as_text=st.booleans(), field=st.sampled_from(["time", "message"]))
def test_any_time_is_refused_cleanly_or_fully_usable(
    memory: Memory, local: datetime, offset: timezone, as_text: bool, field: str
) -> None:
    value: Any = local.replace(tzinfo=offset)
    if as_text:
        value = value.isoformat()
    expected_ok = 0 <= utc_microseconds(local, offset) <= LAST_SECOND
    add: dict[str, Any] = {"time": value} if field == "time" else {}
    messages = MESSAGE if field == "time" else [{**MESSAGE[0], "time": value}, MESSAGE[1]]
    try:
        added = memory.add("prop", messages, session_id="p", **add)
    except ValidationError as exc:
        assert not expected_ok, exc
        assert exc.where in ("time", "messages[0].time")
        return
    assert expected_ok
    block = memory.get("prop", added.block_ids[0])
    want = datetime(1, 1, 1, tzinfo=UTC) + timedelta(microseconds=utc_microseconds(local, offset))
    # Epoch seconds in a double keep about 30 microseconds near year 9999.
    assert abs(block.event_time - want) <= timedelta(microseconds=64)
    assert block.time_annotation and memory.list("prop", limit=10_000)
    for key in ("before", "after", "at"):
        memory.search("prop", "oak planted last week", k=3, **{key: value})
    memory.delete_user("prop")


# -- every interface refuses them the same way -------------------------------------------------------------


@pytest.fixture
def http(tmp_path: Path) -> Any:
    svc = make_service(tmp_path)
    yield svc
    svc.close()


def test_http_answers_422_naming_the_field_never_500(http: Service) -> None:
    client = http.client(http.new_user("alice"))
    for value in ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59.999999Z", 1e20]:
        resp = client.post("/v1/memories", json={"messages": MESSAGE, "time": value})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "time", resp.text
        resp = client.post("/v1/memories", json={"messages": [{**MESSAGE[0], "time": value}]})
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "messages[0].time", resp.text
        for field in ("before", "after", "at"):
            resp = client.post("/v1/search", json={"query": "oak", field: value})
            assert resp.status_code == 422 and resp.json()["error"]["field"] == field, resp.text
    for raw in (
        b'{"query": "oak", "at": NaN}',
        b'{"query": "oak", "before": 1e400}',
        b'{"query": "x", "after": -1e999}',
    ):
        resp = client.post("/v1/search", content=raw, headers={"content-type": "application/json"})
        assert 400 <= resp.status_code < 500, resp.text
    assert client.get("/v1/memories").json() == []


def test_cli_exits_2_naming_the_field(tmp_path: Path) -> None:
    env = {"MEMLANE_STORE": str(tmp_path / "cli.db"), "MEMLANE_EMBEDDER": "hashing"}
    assert run_cli(["add", "alice"], env, json.dumps(MESSAGE)).exit_code == 0
    before = store_content(tmp_path / "cli.db")
    for value in ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"]:
        assert_clean_refusal(run_cli(["add", "alice", "--time", value], env, json.dumps(MESSAGE)), "time")
        for flag in ("--before", "--after", "--at"):
            assert_clean_refusal(run_cli(["search", "alice", "oak", flag, value], env), flag.strip("-"))
    for raw in ("1e20", "NaN", "Infinity", "-1e400", "9" * 30):
        stdin = '[{"role": "user", "content": "hi", "time": ' + raw + "}]"
        assert_clean_refusal(run_cli(["add", "alice"], env, stdin), "stdin")
    assert store_content(tmp_path / "cli.db") == before


def test_mcp_gives_a_tool_error_naming_the_field(tmp_path: Path) -> None:
    mem = Memory.open(tmp_path / "mcp.db", embedder="hashing")

    async def main() -> list[str]:
        texts = []
        async with Client(build_server(mem, user="alice")) as client:
            for args in (
                ("add_memory", {"messages": MESSAGE, "time": "0001-01-01T00:00:00+05:00"}),
                ("add_memory", {"messages": [{**MESSAGE[0], "time": "9999-12-31T23:59:59-05:00"}]}),
                ("search_memory", {"query": "oak", "at": "0001-01-01T00:00:00+05:00"}),
                ("search_memory", {"query": "oak", "before": 1e20}),
            ):
                res = await client.call_tool(*args)
                assert res.is_error
                texts.append(" ".join(getattr(c, "text", "") for c in res.content))
        return texts

    try:
        texts = anyio.run(main)
        assert "time" in texts[0] and "messages[0].time" in texts[1] and "at" in texts[2] and "before" in texts[3]
        assert mem.users() == []
    finally:
        mem.close()
