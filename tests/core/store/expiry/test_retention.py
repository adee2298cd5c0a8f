"""Retention on every backend: policies, what expires at a fixed clock, complete deletion of what expired
and nothing else, newest-N, dry runs, races with adds and with delete-user, the worker's sweep."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.llm import CallLog, ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import content_hash
from memlane.core.retention import MAX_AGE_DAYS, MAX_BLOCKS, RetentionPolicy
from memlane.core.store.protocol import Store

StoreFactory = Callable[[], Store]
T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=10, hours=1)  # the sweeps' fixed clock


def chat(user: str, i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"{user} says thing{i} about topic{i}"},
        {"role": "assistant", "content": f"noted thing{i}"},
    ]


def extraction_reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0].split(": ", 1)[1]
    return json.dumps({"summary": f"Summary of: {first}", "facts": [f"Fact: {first}", "shared marker fact"]})


def add_days(mem: Memory, user: str, days: range, *, extract: str = "off") -> dict[int, tuple[str, ...]]:
    """One exchange (two blocks, dual) per day T0 + i days; returns the block ids by day."""
    return {
        i: mem.add(user, chat(user, i), session_id=f"s{i}", time=T0 + timedelta(days=i), extract=extract).block_ids  # type: ignore[arg-type]
        for i in days
    }


def ids(mem: Memory, user: str) -> set[str]:
    return {b.id for b in mem.list(user, limit=10_000)}


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"max_age_days": 0}, "max_age_days"),
        ({"max_age_days": -3}, "max_age_days"),
        ({"max_age_days": MAX_AGE_DAYS + 1}, "max_age_days"),
        ({"max_age_days": 2.5}, "max_age_days"),
        ({"max_age_days": True}, "max_age_days"),
        ({"max_blocks": 0}, "max_blocks"),
        ({"max_blocks": MAX_BLOCKS + 1}, "max_blocks"),
        ({"max_blocks": "10"}, "max_blocks"),
    ],
)
def test_bad_policies_are_refused_with_where(kwargs: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as err:
        RetentionPolicy(**kwargs)  # type: ignore[arg-type]
    assert err.value.where == where


def test_policies_default_user_override_and_fallback(memory: Memory) -> None:
    add_days(memory, "alice", range(1))
    add_days(memory, "bob", range(1))
    assert memory.retention("alice") == (None, "none")
    memory.set_retention(None, RetentionPolicy(max_age_days=90))
    memory.set_retention("bob", RetentionPolicy(max_blocks=10))
    assert memory.retention("alice") == (RetentionPolicy(max_age_days=90), "default")
    assert memory.retention("bob") == (RetentionPolicy(max_blocks=10), "user")
    assert memory.retention() == (RetentionPolicy(max_age_days=90), "default")
    memory.set_retention("bob", RetentionPolicy(max_age_days=7, max_blocks=3))  # replaces, not merges
    assert memory.retention("bob") == (RetentionPolicy(max_age_days=7, max_blocks=3), "user")
    memory.set_retention("bob", None)
    assert memory.retention("bob") == (RetentionPolicy(max_age_days=90), "default")
    memory.set_retention(None, None)
    assert memory.retention("bob") == (None, "none")
    with pytest.raises(NotFoundError):
        memory.set_retention("carol", RetentionPolicy(max_age_days=1))
    with pytest.raises(NotFoundError):
        memory.retention("carol")


def test_aged_blocks_go_and_nothing_else(memory: Memory) -> None:
    days = add_days(memory, "alice", range(10))
    bob = add_days(memory, "bob", range(10))
    memory.set_retention("alice", RetentionPolicy(max_age_days=5))
    report = memory.apply_retention(now=NOW)
    # The cutoff is NOW - 5 days = T0 + 5 days 1 hour: days 0-5 are older, days 6-9 are kept.
    gone = {b for i in range(6) for b in days[i]}
    kept = {b for i in range(6, 10) for b in days[i]}
    assert ids(memory, "alice") == kept
    assert ids(memory, "bob") == {b for v in bob.values() for b in v}  # no policy for bob: untouched
    by_user = {u.user: u for u in report.users}
    assert (by_user["alice"].expired, by_user["alice"].remaining, by_user["alice"].source) == (12, 8, "user")
    assert (by_user["bob"].expired, by_user["bob"].remaining, by_user["bob"].source) == (0, 20, "none")
    for block_id in gone:
        with pytest.raises(NotFoundError):
            memory.get("alice", block_id)
    for mode in ("vector", "keyword", "hybrid"):
        found = {
            h.block.id for h in memory.search("alice", "says thing2 about topic2", k=50, mode=mode, distinct=False)
        }
        assert found and not found & gone, mode
    assert memory.store.integrity_check() == []
    assert memory.apply_retention(now=NOW).expired == 0  # idempotent


def test_expired_blocks_leave_nothing_in_any_table(store_factory: StoreFactory) -> None:
    """The sweep's result equals a store that never had the expired blocks: the same rows in every table of
    the user (keys, vectors, term statistics, session words, jobs), and the expired texts' cached vectors
    gone."""
    swept = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    fresh = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    try:
        add_days(swept, "alice", range(8), extract="sync")
        add_days(swept, "alice", range(8, 10), extract="async")  # queued jobs of kept blocks
        add_days(swept, "bob", range(10), extract="async")
        add_days(fresh, "alice", range(5, 8), extract="sync")
        add_days(fresh, "alice", range(8, 10), extract="async")
        add_days(fresh, "bob", range(10), extract="async")
        old_jobs = swept.add("alice", chat("alice", 99), session_id="s99", time=T0 - timedelta(days=1), extract="async")
        swept.set_retention(None, RetentionPolicy(max_age_days=6))
        swept.set_retention("bob", RetentionPolicy())  # bob keeps everything despite the default
        report = swept.apply_retention(now=NOW)
        assert {u.user: u.expired for u in report.users} == {"alice": 12, "bob": 0}
        for user in ("alice", "bob"):
            counts, expected = swept.store.user_row_counts(user), fresh.store.user_row_counts(user)
            expected["retention_policies"] = 1 if user == "bob" else 0
            # SQLite's segments are how the keys are laid out, not what they are: their keys are counted.
            counts.pop("key_segments", None), expected.pop("key_segments", None)
            # A session outlives its expired blocks (it is deleted by delete_session or with its user).
            counts.pop("sessions", None), expected.pop("sessions", None)
            assert counts == expected, user
        assert swept.store.integrity_check() == []
        assert old_jobs.jobs_enqueued == 2 and swept.queue_status().queued == fresh.queue_status().queued
        model = swept.embedder.model_id
        gone = [content_hash(f"user: alice says thing{i} about topic{i}\nassistant: noted thing{i}") for i in (0, 4)]
        kept = content_hash("user: alice says thing5 about topic5\nassistant: noted thing5")
        assert swept.store.get_vectors(model, gone) == {}
        assert set(swept.store.get_vectors(model, [kept])) == {kept}
        assert swept.store.get_vectors(model, [content_hash("shared marker fact")])  # still used by kept keys
    finally:
        swept.close()
        fresh.close()


def test_newest_n_keeps_exactly_n(memory: Memory) -> None:
    days = add_days(memory, "alice", [3, 0, 7, 1, 9, 5, 2])  # stored out of event order
    memory.set_retention("alice", RetentionPolicy(max_blocks=5))
    dry = memory.apply_retention(now=NOW, dry_run=True)
    assert (dry.expired, dry.users[0].remaining, dry.dry_run) == (9, 5, True)
    assert len(ids(memory, "alice")) == 14  # a dry run deletes nothing
    memory.apply_retention(now=NOW)
    left = memory.list("alice")
    assert len(left) == 5
    assert {b.id for b in left} >= set(days[9]) | set(days[7])  # the newest by event time
    assert {b.event_time for b in left} == {T0 + timedelta(days=d) for d in (5, 7, 9)}
    memory.apply_retention(now=NOW)
    assert len(memory.list("alice")) == 5


def test_either_rule_expires_a_block(memory: Memory) -> None:
    add_days(memory, "alice", range(10))
    memory.set_retention(None, RetentionPolicy(max_age_days=8, max_blocks=10))
    memory.apply_retention(now=NOW)
    # Age keeps days 3-9 (14 blocks); the count keeps the newest 10 (days 5-9).
    assert {b.event_time for b in memory.list("alice")} == {T0 + timedelta(days=d) for d in range(5, 10)}
    memory.set_retention(None, RetentionPolicy(max_age_days=2, max_blocks=10))
    memory.apply_retention(now=NOW)
    assert {b.event_time for b in memory.list("alice")} == {T0 + timedelta(days=d) for d in (9,)}


def test_one_user_and_unknown_users(memory: Memory) -> None:
    add_days(memory, "alice", range(10))
    add_days(memory, "bob", range(10))
    memory.set_retention(None, RetentionPolicy(max_age_days=2))
    report = memory.apply_retention(now=NOW, user="bob")
    assert [u.user for u in report.users] == ["bob"] and report.expired == 18
    assert len(memory.list("alice")) == 20
    with pytest.raises(NotFoundError):
        memory.apply_retention(now=NOW, user="carol")
    with pytest.raises(ValidationError):
        memory.apply_retention(now="not a time")


def test_large_sweeps_run_in_batches(memory: Memory) -> None:
    many = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i}"} for i in range(1300)]
    memory.add("alice", many, time=T0, perspective="single")  # 650 blocks, more than one batch
    memory.add("alice", chat("alice", 1), time=NOW)
    memory.set_retention("alice", RetentionPolicy(max_age_days=1))
    report = memory.apply_retention(now=NOW)
    assert report.expired == 650 and len(memory.list("alice")) == 2


def test_delete_user_takes_the_policy_and_a_new_user_starts_on_the_default(memory: Memory) -> None:
    add_days(memory, "alice", range(2))
    memory.set_retention("alice", RetentionPolicy(max_blocks=1))
    memory.delete_user("alice")
    assert memory.store.user_row_counts("alice")["retention_policies"] == 0
    add_days(memory, "alice", range(2))
    assert memory.retention("alice") == (None, "none")


def test_a_sweep_racing_adds_never_deletes_a_block_to_keep(memory: Memory) -> None:
    """Adds of new blocks while sweeps run: every new block survives the age rule, and after the last sweep
    the newest-N rule has kept exactly the N newest of everything added (a decision made without a
    concurrent add would have dropped a newer block)."""
    add_days(memory, "alice", range(5))
    memory.set_retention("alice", RetentionPolicy(max_age_days=3, max_blocks=12))
    stop = threading.Event()
    added: list[tuple[datetime, tuple[str, ...]]] = []
    errors: list[BaseException] = []

    def adder() -> None:
        try:
            for i in range(30):
                at = NOW - timedelta(hours=30 - i)  # newer and newer, all within the age rule
                added.append((at, memory.add("alice", chat("alice", 100 + i), time=at).block_ids))
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=adder)
    thread.start()
    sweeps = 0
    while not stop.is_set() or sweeps == 0:
        memory.apply_retention(now=NOW)
        sweeps += 1
    thread.join()
    memory.apply_retention(now=NOW)
    assert not errors
    newest = {b for _, block_ids in sorted(added)[-6:] for b in block_ids}
    assert ids(memory, "alice") == newest


def test_a_sweep_racing_delete_user_is_harmless(memory: Memory) -> None:
    memory.set_retention(None, RetentionPolicy(max_age_days=1))
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            memory.apply_retention(now=NOW)
        except BaseException as exc:
            errors.append(exc)

    for _ in range(5):
        add_days(memory, "alice", range(6))
        thread = threading.Thread(target=sweep)
        thread.start()
        memory.delete_user("alice")
        thread.join()
        assert not errors
        assert memory.store.user_row_counts("alice") == dict.fromkeys(memory.store.user_row_counts("alice"), 0)
        assert memory.store.integrity_check() == []


def test_llm_calls_of_expired_blocks_go_with_them(store_factory: StoreFactory, tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.db")
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(extraction_reply, call_log=log), call_log=log)
    try:
        add_days(mem, "alice", range(10), extract="sync")
        assert len(log.list(100)) == 20
        mem.set_retention("alice", RetentionPolicy(max_blocks=4))
        mem.apply_retention(now=NOW)
        left = log.list(100)
        assert len(left) == 4
        assert all("thing8" in r.request or "thing9" in r.request for r in left)
    finally:
        mem.close()
        log.close()


def test_the_worker_sweeps_periodically(store_factory: StoreFactory) -> None:
    mem = Memory(store_factory(), HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    try:
        mem.set_retention(None, RetentionPolicy(max_age_days=30))
        worker = mem.worker(concurrency=1, poll_s=0.02, retention_every_s=0.05)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            now = datetime.now(UTC)
            for round_ in range(3):
                old = mem.add("alice", chat("alice", round_), time=now - timedelta(days=31 + round_)).block_ids
                new = mem.add("alice", chat("alice", 10 + round_), time=now).block_ids
                deadline = time.monotonic() + 10
                while set(old) & ids(mem, "alice") and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert not set(old) & ids(mem, "alice") and set(new) <= ids(mem, "alice")
        finally:
            worker.stop()
            thread.join()
        assert worker.stats.sweeps >= 3 and worker.stats.sweep_errors == []
        with pytest.raises(ValidationError):
            mem.worker(retention_every_s=-1)
    finally:
        mem.close()
