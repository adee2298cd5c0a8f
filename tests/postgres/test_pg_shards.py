"""A store sharded by user over two PostgreSQL servers ($MEMLANE_TEST_POSTGRES_URL and
$MEMLANE_TEST_POSTGRES_URL_2, which `.ci/postgres.sh start` and `.ci/postgres.sh start _2` export): routing,
isolation, the lists, deletion, keys, the queue, and moving a user with an interruption after each step.

(The whole store contract suite and the delete races also run on it: the ``sharded`` store_factory param.)"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from memlane.core.apikeys import ApiKeys
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ConfigError, NotFoundError, UserDeletedError
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.postgres import open_postgres, redact, shard_urls
from memlane.core.store.postgres.moves import STEPS, Interrupted, move_user, unfinished
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.shard import UserMovingError, home_shard
from memlane.core.store.postgres.sharded import ShardedStore

pytestmark = pytest.mark.postgres


@pytest.fixture
def urls() -> list[str]:
    first, second = os.environ.get("MEMLANE_TEST_POSTGRES_URL"), os.environ.get("MEMLANE_TEST_POSTGRES_URL_2")
    if not first or not second:
        pytest.skip(
            "needs two PostgreSQL servers: set MEMLANE_TEST_POSTGRES_URL and MEMLANE_TEST_POSTGRES_URL_2 "
            "(.ci/postgres.sh start, then .ci/postgres.sh start _2)"
        )
    return [first, second]


@pytest.fixture
def schema(urls: list[str]) -> Iterator[str]:
    """A fresh schema, made on both servers (a URL may point its session at it), dropped at the end."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    for url in urls:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    for url in urls:
        drop_schema(url, name)


def schema_url(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@pytest.fixture
def open_store(urls: list[str], schema: str) -> Iterator[Any]:
    made: list[ShardedStore] = []

    def make(**kw: Any) -> ShardedStore:
        made.append(ShardedStore(urls, schema=schema, pool_max=4, **kw))
        return made[-1]

    yield make
    for store in made:
        store.close()


def user_on(shard: int, tag: str = "u") -> str:
    """The first name ``{tag}-N`` whose home is ``shard`` (of two)."""
    return next(f"{tag}-{i}" for i in range(1000) if home_shard(f"{tag}-{i}", 2) == shard)


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def extraction_reply(messages: Sequence[ChatMessage]) -> str:
    first = messages[-1]["content"].splitlines()[0].split(": ", 1)[1]
    return json.dumps({"summary": f"Summary of: {first}", "facts": [f"Fact: {first}"]})


def snapshot(mem: Memory, user: str) -> tuple[Any, ...]:
    """What a user sees of their memory: blocks (all fields), a search, their keys."""
    blocks = mem.list(user, limit=1000)
    hits = [(h.block.id, round(h.score, 6)) for h in mem.search(user, "garden tomatoes", k=5, distinct=False)]
    return tuple(blocks), tuple(hits), tuple(mem.store.list_api_keys(user))


def test_the_hash_is_stable_and_documented() -> None:
    # The rule docs/scaling.md states: SHA-256 of the UTF-8 name, first 8 bytes big-endian, modulo N.
    # Fixed values: a change of the rule would strand every user of every sharded store.
    assert [home_shard(n, 2) for n in ("alice", "bob", "carol", "dave")] == [1, 0, 0, 1]
    assert [home_shard(n, 3) for n in ("alice", "bob", "carol", "dave")] == [2, 2, 2, 1]
    digest = hashlib.sha256("zoë".encode()).digest()
    assert home_shard("zoë", 7) == int.from_bytes(digest[:8], "big") % 7


def test_the_url_lists_shards_and_leaves_libpq_multi_host_alone() -> None:
    assert shard_urls("postgresql://a/db") == ["postgresql://a/db"]
    assert shard_urls("postgresql://h1,h2/db") == ["postgresql://h1,h2/db"]  # failover hosts: one database
    assert shard_urls("postgresql://a/db, postgres://b/db") == ["postgresql://a/db", "postgres://b/db"]
    assert redact("postgresql://u:pw@a/db,postgresql://v:pw2@b/db") == "postgresql://u:***@a/db,postgresql://v:***@b/db"
    with pytest.raises(ConfigError, match="same database"):
        shard_urls("postgresql://a/db,postgresql://a/db")


def test_users_live_on_their_home_shard_isolated_and_listed_together(open_store: Any) -> None:
    store = open_store()
    mem = Memory(store, HashingEmbedder())
    a, b = user_on(0), user_on(1)
    mem.add(a, chat("I grow tomatoes in my garden", "Nice"))
    mem.add(b, chat("My garden has only roses", "Lovely"))
    assert store.shards[0].has_user(a) and not store.shards[1].has_user(a)
    assert store.shards[1].has_user(b) and not store.shards[0].has_user(b)
    assert [u.name for u in mem.users()] == sorted([a, b])
    assert {h.block.user for h in mem.search(a, "garden", k=10)} == {a}
    # a's block references mean nothing for b, although both shards number their rows from 1
    refs = [r for r, _ in store.keyword_candidates(a, "garden", 10)]
    assert refs and store.fetch_blocks(b, refs) == {} and store.block_positions(b, refs) == {}
    # a second router (another process) routes the same way
    other = Memory(open_store(), HashingEmbedder())
    assert [blk.message for blk in other.list(a)] == [blk.message for blk in mem.list(a)]


def test_the_shards_must_be_listed_in_their_order(urls: list[str], schema: str, open_store: Any) -> None:
    open_store().close()
    with pytest.raises(ConfigError, match="is shard 1 of 2, but the store URL lists it as shard 0 of 2"):
        ShardedStore(list(reversed(urls)), schema=schema)


def test_an_unsharded_store_with_users_is_not_taken_as_a_shard(urls: list[str], schema: str) -> None:
    from memlane.core.store.postgres.store import PostgresStore

    single = Memory(PostgresStore(urls[0], schema=schema), HashingEmbedder())
    single.add("alice", chat("tomatoes"))
    single.close()
    with pytest.raises(ConfigError, match="holds the users of a store that was not sharded"):
        ShardedStore(urls, schema=schema)


def test_memory_open_and_the_cli_take_the_list(urls: list[str], schema: str) -> None:
    from memlane.interfaces.cli.app import cli, register_all

    url = ",".join(schema_url(u, schema) for u in urls)
    mem = Memory.open(url, embedder="hashing")
    assert isinstance(mem.store, ShardedStore)
    a, b = user_on(0), user_on(1)
    mem.add(a, chat("tomatoes"))
    mem.add(b, chat("roses"))
    mem.close()
    register_all()
    runner = CliRunner()
    res = runner.invoke(cli, ["users", "--json", "--store", url, "--embedder", "hashing"])
    assert res.exit_code == 0, res.output
    assert [u["user"] for u in json.loads(res.output)] == sorted([a, b])
    res = runner.invoke(cli, ["shards", "list", "--json", "--store", url])
    assert res.exit_code == 0, res.output
    assert [r["users"] for r in json.loads(res.output)] == [1, 1]
    res = runner.invoke(cli, ["shards", "move", a, "--to", "1", "--drain", "0", "--store", url])
    assert res.exit_code == 0 and f"moved {a} from shard 0 to shard 1" in res.output, res.output
    res = runner.invoke(cli, ["shards", "where", a, "--json", "--store", url])
    assert json.loads(res.output) == {"user": a, "shard": 1, "home": 0, "exists": True, "unfinished_move": None}
    res = runner.invoke(cli, ["shards", "move", a, "--to", "1", "--store", url])
    assert res.exit_code == 0 and "already" in res.output
    res = runner.invoke(cli, ["shards", "list", "--store", schema_url(urls[0], schema)])
    assert res.exit_code != 0 and "needs a sharded store" in res.output


def test_delete_user_on_its_shard_with_keys_and_tombstone(open_store: Any) -> None:
    store = open_store()
    mem = Memory(store, HashingEmbedder())
    a, b = user_on(0), user_on(1)
    mem.add(a, chat("tomatoes"))
    mem.add(b, chat("roses"))
    keys = ApiKeys(store)
    key_b = keys.create(b, label="laptop")
    verified = keys.verify(key_b.key)
    assert verified is not None and verified.user == b
    before = store.deletion_epoch()
    deleted = mem.delete_user_counts(b)
    assert (deleted.blocks, deleted.keys) == (2, 1)  # dual perspective: two blocks an add
    assert keys.verify(key_b.key) is None
    assert store.shards[1].deletion_epoch() == 1 and store.shards[0].deletion_epoch() == 0
    assert set(store.user_row_counts(b).values()) == {0}
    assert [u.name for u in mem.users()] == [a]
    # an add that began before the delete (it read the epochs then, here through the key) is refused
    with pytest.raises(UserDeletedError):
        mem.add(b, chat("late"), epoch=verified.epoch)
    with pytest.raises(UserDeletedError):
        mem.add(b, chat("late"), epoch=before)
    mem.add(a, chat("still here"), epoch=before)  # the other shard's users are not affected
    mem.add(b, chat("a new start"))  # begun after the delete: the user starts afresh
    assert {blk.message for blk in mem.list(b)} == {"user: a new start"}


def test_one_worker_serves_every_shard(open_store: Any) -> None:
    store = open_store()
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    users = [user_on(0, "w"), user_on(1, "w")]
    ids = [mem.add(u, chat(f"{u} plants tomatoes", "ok"), extract="async") for u in users]
    assert all(r.jobs_enqueued == 2 for r in ids)
    assert mem.queue_status().queued == 4
    stats = mem.worker(concurrency=2, poll_s=0.01).run(drain=True)
    assert stats.done == 4
    status = mem.queue_status()
    assert (status.queued, status.running, status.done, status.dead) == (0, 0, 4, 0)
    for u in users:
        assert all(b.summary and b.summary.startswith("Summary of:") for b in mem.list(u))
    # sync extraction claims its own jobs by id, across shards alike
    res = mem.add(users[1], chat("and cucumbers", "ok"), extract="sync")
    assert res.jobs_enqueued == 2
    assert all(b.summary for b in mem.list(users[1]))
    assert store.integrity_check() == []


def seed(mem: Memory, user: str) -> None:
    mem.add(user, chat("I grow tomatoes in my garden", "How many?"), session_id="s1", time="2024-05-01")
    mem.add(user, chat("About twenty tomato plants", "Wow"), session_id="s2", time="2024-06-01", extract="async")
    ApiKeys(mem.store).create(user, label="phone")


@pytest.mark.parametrize("stop_after", [None, *STEPS[:-1]])
def test_a_move_interrupted_after_any_step_loses_nothing_and_a_rerun_finishes_it(
    open_store: Any, stop_after: str | None
) -> None:
    store = open_store()
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(extraction_reply))
    user, other = user_on(0, "m"), user_on(1, "m")
    seed(mem, user)
    seed(mem, other)
    key = ApiKeys(store).create(user, label="laptop")
    before = snapshot(mem, user)
    assert store.shards[0].query("SELECT count(*) FROM embed_cache")[0][0] > 0

    def hook(step: str) -> None:
        if step == stop_after:
            raise Interrupted(step)

    if stop_after is not None:
        with pytest.raises(Interrupted):
            move_user(store, user, 1, drain_s=0.0, after_step=hook)
        assert unfinished(store, user) == (0, 1)
        # Nothing lost meanwhile: the user reads the same, from wherever routers send them.
        store.forget_route(user)
        assert snapshot(mem, user) == before
        if STEPS.index(stop_after) < STEPS.index("switch"):
            # Until the switch, writes are refused, with a StoreError that says so (HTTP 503).
            with pytest.raises(UserMovingError, match="being moved"):
                mem.add(user, chat("during the move"))
            with pytest.raises(UserMovingError):
                ApiKeys(store).revoke(user, key.record.key_id)
        else:
            # After it, the target takes the user's writes, and the rest of the move keeps them.
            mem.add(user, chat("during the move"))
            before = snapshot(mem, user)
        assert ApiKeys(store).verify(key.key) is not None
        with pytest.raises(ConfigError, match="rerun with --to 1"):
            move_user(store, user, 0, drain_s=0.0)
    report = move_user(store, user, 1, drain_s=0.0)
    assert report.steps[-1] == "clean"
    assert unfinished(store, user) is None
    assert store.shard_of(user, fresh=True) == 1
    assert not store.shards[0].has_user(user) and store.shards[1].has_user(user)
    assert snapshot(mem, user) == before
    assert sum(store.shards[0].user_row_counts(user).values()) == 0
    # the cached vectors of the user's texts went too (only this user lived on shard 0)
    assert store.shards[0].query("SELECT count(*) FROM embed_cache")[0][0] == 0
    assert ApiKeys(store).verify(key.key) is not None
    # The fenced jobs are claimable again on the target, and complete there.
    assert mem.worker(concurrency=2, poll_s=0.01).run(drain=True).done == 4
    assert all(b.summary for b in mem.list(user, session_id="s2"))
    mem.add(user, chat("after the move"))
    before = snapshot(mem, user)
    assert [u.name for u in mem.users()] == sorted([user, other])
    assert snapshot(mem, other)[0] and store.integrity_check() == []
    # Idempotent: again is a no-op; back home works the same way.
    assert move_user(store, user, 1, drain_s=0.0).steps == ()
    move_user(store, user, 0, drain_s=0.0)
    assert store.shard_of(user, fresh=True) == 0 and snapshot(mem, user) == before


def test_a_stale_router_is_sent_on_and_a_deleted_moved_user_stays_deleted(open_store: Any) -> None:
    mover, stale = open_store(), open_store()
    mem = Memory(stale, HashingEmbedder())
    user = user_on(0, "s")
    seed(mem, user)
    assert stale.shard_of(user) == 0  # remembered for ROUTE_TTL_S
    epoch = stale.deletion_epoch()
    move_user(mover, user, 1, drain_s=0.0)
    mem.add(user, chat("written through a stale route"))  # refused by shard 0, retried on shard 1
    assert stale.shard_of(user) == 1
    assert mover.shards[1].has_user(user) and not mover.shards[0].has_user(user)
    assert len(Memory(mover, HashingEmbedder()).list(user)) == 6
    Memory(mover, HashingEmbedder()).delete_user(user)
    with pytest.raises(UserDeletedError):
        mem.add(user, chat("in flight across the delete"), epoch=epoch)
    with pytest.raises(NotFoundError):
        move_user(mover, user, 0, drain_s=0.0)


def test_a_user_that_does_not_exist_cannot_be_moved(open_store: Any) -> None:
    with pytest.raises(NotFoundError):
        move_user(open_store(), "nobody", 1, drain_s=0.0)


def test_open_postgres_opens_a_list_as_a_sharded_store(urls: list[str], schema: str) -> None:
    store = open_postgres(",".join(schema_url(u, schema) for u in urls))
    try:
        assert isinstance(store, ShardedStore) and store.count == 2
    finally:
        store.close()


MEMLANE = "from memlane.interfaces.cli.app import main\nmain()\n"


def test_a_move_killed_mid_way_is_finished_by_running_it_again(urls: list[str], schema: str) -> None:
    """kill -9 of `memlane shards move` while it drains (the map switched, the source not yet cleaned)."""
    url = ",".join(schema_url(u, schema) for u in urls)
    store = ShardedStore(shard_urls(url), pool_max=2)
    mem = Memory(store, HashingEmbedder())
    user = user_on(0, "k")
    seed(mem, user)
    before = snapshot(mem, user)
    proc = subprocess.Popen(
        [sys.executable, "-c", MEMLANE, "shards", "move", user, "--to", "1", "--drain", "60", "--store", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while store.shard_of(user, fresh=True) != 1:
            assert proc.poll() is None and time.monotonic() < deadline, "the move did not reach its switch"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    assert unfinished(store, user) == (0, 1) and store.shards[0].has_user(user)
    res = subprocess.run(
        [sys.executable, "-c", MEMLANE, "shards", "move", user, "--to", "1", "--drain", "0", "--store", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and f"moved {user} from shard 0 to shard 1" in res.stdout, res.stdout + res.stderr
    assert unfinished(store, user) is None and not store.shards[0].has_user(user)
    store.forget_route(user)
    assert snapshot(mem, user) == before
    store.close()


@pytest.mark.parametrize("interrupted", [False, True])
def test_growing_keeps_every_user_where_they_are_and_a_rerun_finishes_it(
    urls: list[str], schema: str, interrupted: bool
) -> None:
    """Two shards grow to three (the third: another schema on the first server)."""
    from memlane.core.store.postgres.grow import _pin, grow
    from memlane.interfaces.cli.app import cli, register_all

    third = f"{schema}_3"
    with psycopg.connect(urls[0], autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(third)))
    old = [schema_url(u, schema) for u in urls]
    new = [*old, schema_url(urls[0], third)]
    try:
        store = ShardedStore(old)
        mem = Memory(store, HashingEmbedder())
        names = [f"g-{i}" for i in range(24)]
        for name in names:
            mem.add(name, chat(f"{name} grows tomatoes"))
        move_user(store, names[0], 1 - store.shard_of(names[0]), drain_s=0.0)  # one user found by the map
        seen = {name: [b.id for b in mem.list(name)] for name in names}
        mem.close()
        assert any(home_shard(n, 3) != home_shard(n, 2) for n in names)
        if interrupted:  # pinned, then only the first shard recorded the new count
            half = ShardedStore(new, accept_counts=(2,), pool_max=2)
            _pin(half, 2)
            half.shards[0].record_count(3)
            half.close()
            for urls_given in (old, new):
                with pytest.raises(ConfigError, match="but the store URL lists it"):
                    ShardedStore(urls_given)
        register_all()
        res = CliRunner().invoke(cli, ["shards", "grow", "--store", ",".join(old), "--new", ",".join(new)])
        assert res.exit_code == 0 and "grew from 2 to 3 shards: 24 users" in res.output, res.output
        with pytest.raises(ConfigError):
            ShardedStore(old)  # the old list is refused from now on
        grown = ShardedStore(new)
        mem = Memory(grown, HashingEmbedder())
        assert [u.name for u in mem.users()] == sorted(names)
        assert {name: [b.id for b in mem.list(name)] for name in names} == seen
        assert all(mem.search(name, "tomatoes", k=1)[0].block.user == name for name in names)
        assert grown.shards[2].list_users() == []  # no data moved
        mover = next(n for n in names if home_shard(n, 3) == 2)
        move_user(grown, mover, 2, drain_s=0.0)
        assert grown.shards[2].has_user(mover) and [b.id for b in mem.list(mover)] == seen[mover]
        newcomer = next(f"new-{i}" for i in range(100) if home_shard(f"new-{i}", 3) == 2)
        mem.add(newcomer, chat("hello"))
        assert grown.shards[2].has_user(newcomer)
        assert grow(old, new).pinned == 0  # finished: again does nothing
        mem.close()
    finally:
        drop_schema(urls[0], third)


def test_retention_policies_live_with_their_user_and_sweeps_reach_every_shard(open_store: Any) -> None:
    from memlane.core.retention import RetentionPolicy

    store = open_store()
    mem = Memory(store, HashingEmbedder())
    a, b = user_on(0, "r"), user_on(1, "r")
    for user in (a, b):
        mem.add(user, chat("an old chat about tomatoes", "noted"), time="2020-01-01T10:00:00Z")
        mem.add(user, chat("a new chat about roses", "noted"), time="2026-06-01T10:00:00Z")
    mem.set_retention(None, RetentionPolicy(max_age_days=365))
    mem.set_retention(b, RetentionPolicy(max_blocks=1))
    policies = mem.retention_policies()
    assert policies.default == RetentionPolicy(max_age_days=365)
    assert policies.users == {b: RetentionPolicy(max_blocks=1)}
    # the default is kept once, on the first shard; b's own policy on b's shard
    assert store.shards[1].retention_policies().users == {b: RetentionPolicy(max_blocks=1)}
    assert store.shards[0].retention_policies().users == {}

    report = mem.apply_retention(now="2026-07-01T00:00:00Z")
    assert {r.user: r.expired for r in report.users} == {a: 2, b: 3}  # dual: two blocks an exchange
    assert {blk.message.splitlines()[0] for blk in mem.list(a)} == {"user: a new chat about roses"}
    assert len(mem.list(b)) == 1

    # a move takes the user's own policy along, and the source keeps nothing of it
    move_user(store, b, 0, drain_s=0.0)
    store.forget_route(b)
    assert mem.retention(b) == (RetentionPolicy(max_blocks=1), "user")
    assert store.shards[1].query("SELECT count(*) FROM retention_policies")[0][0] == 0


def test_a_move_takes_the_memory_model_along(open_store: Any) -> None:
    """Sessions, a user's display name and metadata, and the blocks' kind, annotations and TTL move with the
    user, and the source keeps nothing of them."""
    store = open_store()
    mem = Memory(store, HashingEmbedder())
    user = user_on(1, "m")
    mem.create_user(user, display_name="Em", metadata={"plan": "pro"})
    mem.create_session(user, "trip", annotations={"kind": "travel"}, metadata={"n": 2}, default_ttl_s=3600)
    added = mem.add_facts(user, ["Em flies to Lisbon in May"], session_id="trip", annotations={"src": "agent"})
    (fact,) = added.block_ids
    mem.add(user, chat("garden tomatoes", "nice"), session_id="home")
    mem.end_session(user, "home")
    before = (snapshot(mem, user), mem.get_session(user, "trip"), mem.get_session(user, "home"), mem.get_user(user))
    assert mem.get(user, fact).expires_at is not None and mem.get(user, fact).kind.value == "fact"
    move_user(store, user, 0, drain_s=0.0)
    store.forget_route(user)
    after = (snapshot(mem, user), mem.get_session(user, "trip"), mem.get_session(user, "home"), mem.get_user(user))
    assert after == before
    assert store.shards[1].query("SELECT count(*) FROM sessions")[0][0] == 0
    assert store.shards[0].integrity_check() == []
