"""Searches and adds on Citus as one call the coordinator hands to the user's node
(memlane.core.store.postgres.delegated): one round trip each, the same answers as one server gives on the same
data, an add that is one transaction (nothing of a refused one stays) and survives a crash of the worker once
acknowledged, and a call that reaches a node without the user's shard doing nothing there."""

from __future__ import annotations

import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from pg_control import PgServer
from psycopg import sql

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import SessionEndedError, StoreError
from memlane.core.llm import ChatMessage, ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.ranking.session_words import session_word_ranks
from memlane.core.store.blocks import BlockWrite
from memlane.core.store.candidates.gather import Gather, gather_stepwise
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.postgres import citus, delegated
from memlane.core.store.postgres.adapt import register_vector
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.schema import drop_schema
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.postgres.tenant import user_key

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
NewStore = Callable[..., PostgresStore]
WORDS = "apple river stone cloud tiger lemon violin garden rocket candle silver harbor meadow pepper".split()  # noqa: SIM905
TABLES = ("blocks", "search_keys", "key_vectors", "jobs", "sessions", "session_terms", "session_lengths")


def chat(a: str, b: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": a}, {"role": "assistant", "content": b}]


def sentence(rng: random.Random, n: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def reply(messages: list[ChatMessage]) -> str:
    """A summary and a fact of the exchange's words, each with the exchange's own mark (no two keys alike)."""
    content = messages[-1]["content"]
    words = [w for w in re.findall(r"[a-z]+", content) if w in WORDS]
    mark = re.findall(r"mk\d+", content)[0]
    return f'{{"summary": "about {" ".join(words[:3])} {mark}", "facts": ["{" ".join(words[-3:])} {mark}"]}}'


@pytest.fixture
def twins(pg_url: str, citus_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    """A store on one server and one on Citus, in schemas of the same name: the same writes in the same order
    give both the same rows under the same references."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    pair = PostgresStore(pg_url, schema=schema, pool_max=4), PostgresStore(citus_url, schema=schema, pool_max=4)
    yield pair
    for store, url in zip(pair, (pg_url, citus_url), strict=True):
        store.close()
        drop_schema(url, schema)


def test_a_search_on_the_users_node_answers_as_one_server_does(twins: tuple[PostgresStore, PostgresStore]) -> None:
    """Every part of a search read on the user's node in one call (both rankings with their scores, the
    candidates' places, their sessions' word counts) equals what one server reads step by step from the same
    data: blocks in several sessions, summaries and facts, blocks whose TTL ran out, key kinds, time windows.
    Every key has a word of its own, so no two keys tie (the order of equal scores is the scan's)."""
    plain, dist = twins
    assert dist.citus and not plain.citus
    rng = random.Random(3)
    for store in twins:
        mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM(reply))
        rng = random.Random(3)
        for user in ("ann", "bo"):
            for i in range(40):
                mem.add(
                    user, chat(f"{sentence(rng)} mk{i}", sentence(rng)), session_id=f"s{i % 7}",
                    time=1.7e9 + 3600 * i, ttl_s=1 if i % 9 == 0 else None, perspective="single",
                    extract="sync" if i % 4 == 0 else "off",
                )  # fmt: skip
    time.sleep(1.1)  # the blocks with a TTL of 1 s have expired
    now = time.time()
    emb = HashingEmbedder()
    asks = 0
    for i in range(24):
        query = sentence(rng, 3)
        for kinds, window, parts in (
            (None, (None, None), (True, True, True, True)),
            (frozenset({"message"}), (None, None), (True, True, True, False)),
            (frozenset({"summary", "fact"}), (1.7e9 + 3600 * 5, 1.7e9 + 3600 * 30), (True, True, False, False)),
            (None, (1.7e9 + 3600 * 10, None), (False, True, True, True)),
            (None, (None, 1.7e9 + 3600 * 20), (True, False, True, True)),
        ):
            vector, keyword, context, words = parts
            scope = Scope(kinds, *window, now=now)
            vec = emb.embed([query])[0] if vector else None
            ask = Gather(query, vec, keyword, 5 + i, scope, context=context, words=words)
            for user in ("ann", "bo", "nobody"):
                want = gather_stepwise(plain, user, ask)
                got = dist.gather(user, ask)
                assert got.positions == want.positions and got.rankings.keys() == want.rankings.keys()
                for name, ranked in want.rankings.items():
                    same_ranking(got.rankings[name], ranked)
                # the counts' rows come in the order the rows were read; the ranks they give do not
                assert (got.word_counts is None) == (want.word_counts is None)
                assert session_word_ranks(got.word_counts) == session_word_ranks(want.word_counts)
                asks += bool(want.rankings.get("vector") or want.rankings.get("keyword"))
    assert asks > 100
    # and a whole search through Memory ranks the same blocks (block ids differ: they are random)
    for q in ("apple river", "tiger violin garden"):
        hits = [[(h.block.message, h.score) for h in Memory(s, emb).search("ann", q, k=8)] for s in twins]
        same_ranking(hits[1], hits[0])


def same_ranking(got: Sequence[tuple[Any, float]], want: Sequence[tuple[Any, float]]) -> None:
    """``got`` ranks as ``want`` does: the same scores in the same order, each item with its score there.
    Items of equal score may come in either order, and a tie at the cut may keep another of the tied items:
    BM25 sums its terms in the order the rows come, so two equal scores can differ in the last bit (and a
    scan's order decides among equal ones)."""
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)
    scores = dict(want)
    for item, score in got:
        assert score == pytest.approx(scores.get(item, want[-1][1]), rel=1e-12), item


def _remote_commands(store: PostgresStore, action: Callable[[], object]) -> list[str]:
    """What the coordinator sent to workers while ``action`` ran on the store's one pooled connection."""
    notices: list[str] = []
    store._settle_cache()  # the cache entries of the adds before are written (on the same connection)
    with store.transaction() as conn:
        conn.execute("SET citus.log_remote_commands TO on")
        conn.execute("SET client_min_messages TO log")
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.commit()
    action()
    with store.transaction() as conn:
        conn.execute("RESET citus.log_remote_commands")
        conn.execute("RESET client_min_messages")
        conn.commit()
    return [n for n in notices if n.startswith(("issuing", "executing"))]


def test_an_add_and_a_search_are_one_round_trip_to_the_users_node(new_citus_store: NewStore) -> None:
    """The coordinator sends a search's reads and an add's writes to the worker as one command each: the
    call of the function, no transaction opened and committed around it, no statement of its own."""
    store = new_citus_store(pool_min=1, pool_max=1)
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(1)
    for i in range(30):
        mem.add("ann", chat(sentence(rng), sentence(rng)), session_id=f"s{i % 4}")
    emb = HashingEmbedder()
    ask = Gather("apple river", emb.embed(["apple river"])[0], True, 20, context=True, words=True)
    sent = _remote_commands(store, lambda: store.gather("ann", ask))
    assert len(sent) == 1 and delegated.GATHER_ROUTINE.name in sent[0], sent
    blocks = mem.add("ann", chat("one more", "note")).block_ids
    (block,) = [b for b in mem.list("ann", limit=500) if b.id == blocks[0]]
    again = [replace(block, id=f"x{i}") for i in range(2)]
    sent = _remote_commands(store, lambda: store.write_blocks("ann", again, emb.embed(["a", "b"])))
    assert len(sent) == 1 and delegated.WRITE_ROUTINE.name in sent[0], sent
    assert store.integrity_check() == []


def _rows(store: PostgresStore, user: str) -> dict[str, int]:
    counts = store.user_row_counts(user)
    (version,) = store.query("SELECT coalesce(max(version), -1) FROM users WHERE id = %s", (user_key(user),))[0]
    return {**{t: counts[t] for t in TABLES}, "users": counts["users"], "version": int(version)}


def test_an_add_on_the_users_node_is_one_transaction(new_citus_store: NewStore) -> None:
    """An add refused part-way (its last block's id taken: the blocks' insert fails after the user's row,
    its new session and the other blocks were written in the call) leaves nothing; one into an ended session
    is refused before anything; the user made by a refused first add is not there either."""
    store = new_citus_store()
    mem = Memory(store, HashingEmbedder())
    emb = HashingEmbedder()
    first = mem.add("ann", chat("first note", "ok"), session_id="s1").block_ids
    (taken,) = [b for b in mem.list("ann") if b.id == first[0]]
    before = _rows(store, "ann")
    fresh = [replace(taken, id=f"new{i}", session_id="s2") for i in range(3)]
    clash = [*fresh, replace(taken, session_id="s2")]  # the taken id comes last
    with pytest.raises(StoreError, match="duplicate key"):
        store.write_blocks("ann", clash, emb.embed([b.message for b in clash]), BlockWrite(enqueue_attempts=3))
    assert _rows(store, "ann") == before
    assert [s.session_id for s in mem.list_sessions("ann").items] == ["s1"]
    mem.end_session("ann", "s1")
    with pytest.raises(SessionEndedError):
        mem.add("ann", chat("too late", "ok"), session_id="s1")
    assert _rows(store, "ann") == before
    with pytest.raises(StoreError, match="duplicate key"):
        store.write_blocks("cy", [*fresh, fresh[0]], emb.embed([b.message for b in [*fresh, fresh[0]]]))
    assert _rows(store, "cy")["users"] == 0 and store.integrity_check() == []


def _holding(store: PostgresStore, user: str) -> tuple[str, str]:
    """The URLs of the worker that holds ``user`` and of the other one."""
    workers = [u for u in os.environ.get("MEMLANE_TEST_CITUS_WORKER_URLS", "").split(",") if u]
    if len(workers) < 2:
        pytest.skip("needs the workers' URLs (.ci/citus.sh exports them)")
    _, node = citus.Cluster(store).where(user)
    port = node.rsplit(":", 1)[1]
    (here,) = [w for w in workers if f":{port}/" in w]
    return here, next(w for w in workers if w != here)


class _Here:
    """A connection whose statements each get a WHERE clause, which keeps the node from handing a function
    call on to the node that holds the user: it runs them itself. (Not a subquery: Citus 13.2 on PostgreSQL 15
    crashes the server process on ``SELECT q.* FROM (SELECT * FROM <distributed function>(...)) q`` and on
    ``SELECT <distributed function>(...) FROM (SELECT 1) s`` sent to a node without the shard.)"""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, query: str | sql.Composed, params: Any = None) -> psycopg.Cursor[Any]:
        text = query if isinstance(query, str) else query.as_string(self.conn)
        clause = " WHERE o_part >= 0" if text.startswith("SELECT * FROM") else " WHERE random() >= 0"
        return self.conn.execute(text + clause, params)


def test_a_call_that_reaches_a_node_without_the_users_shard_does_nothing_there(new_citus_store: NewStore) -> None:
    """The functions check that the user's shard is on their node before they read or write (the coordinator
    routed the call just before a move, say): on the other worker they refuse, having written nothing, and
    answer on the worker that holds it; the store then reads and writes through the coordinator instead, the
    same."""
    store = new_citus_store()
    mem = Memory(store, HashingEmbedder())
    mem.add("ann", chat("apple river", "stone"))
    (block,) = [b for b in mem.list("ann") if b.perspective == "user"]
    before = _rows(store, "ann")
    emb = HashingEmbedder()
    ask = Gather("apple", emb.embed(["apple"])[0], True, 10, context=True)
    want = store.gather("ann", ask)
    here, other = _holding(store, "ann")
    for url, elsewhere in ((other, True), (here, False)):
        with psycopg.connect(url, autocommit=True) as conn:
            (oid, array) = conn.execute("SELECT 'vector'::regtype::oid, 'vector[]'::regtype::oid").fetchone() or ()
            register_vector(conn, oid, array)
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(store.schema or "")))
            node = cast(Conn, _Here(conn))

            def read(node: Conn = node) -> object:
                return delegated.gather(node, "ann", user_key("ann"), ask, store.ann_settings, time.time())[0]

            def write(node: Conn = node) -> object:
                return delegated.write(
                    node, "ann", user_key("ann"), [replace(block, id="x1")], emb.embed(["x"]), since=None,
                    name_sha256="", now=time.time(), attempts=0, default_ttl_s=0,
                )  # fmt: skip

            for call in (read, write):
                if elsewhere:
                    with pytest.raises(delegated.Elsewhere):
                        call()
                else:
                    assert call() in (want, [])
        if elsewhere:
            assert _rows(store, "ann") == before
    assert len(mem.list("ann")) == before["blocks"] + 1  # the add on the worker that holds it

    def moved(*args: object, **kwargs: object) -> object:
        raise delegated.Elsewhere("moved")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(delegated, "gather", moved)
        patch.setattr(delegated, "write", moved)
        assert store.gather("ann", ask).rankings == store.gather("ann", ask).rankings
        added = mem.add("ann", chat("written through the coordinator", "ok"))
    assert len(mem.list("ann")) == before["blocks"] + 1 + len(added.block_ids)
    assert store.integrity_check() == []


def test_acknowledged_adds_survive_a_crash_of_the_users_worker(new_citus_store: NewStore) -> None:
    """Three threads add to users on both workers; one worker stops at once (``pg_ctl stop -m immediate``: no
    checkpoint, its WAL replayed at the next start, as after kill -9) and starts again: every add acknowledged
    before, during and after is there, and only refused adds of its users are missing."""
    data = [d for d in os.environ.get("MEMLANE_TEST_CITUS_WORKER_DATA", "").split(",") if d]
    pg_ctl = os.environ.get("MEMLANE_TEST_PG_CTL_CITUS")
    if not data or not pg_ctl:
        pytest.skip("needs the workers' data folders and pg_ctl (.ci/citus.sh exports them)")
    store = new_citus_store(timeout_s=5, pool_max=6)
    mem = Memory(store, HashingEmbedder())
    users = [f"user{i}" for i in range(8)]
    for user in users:
        mem.add(user, chat(f"{user} first", "ok"))
    here, _ = _holding(store, users[0])
    folder = next(d for d, w in zip(data, os.environ["MEMLANE_TEST_CITUS_WORKER_URLS"].split(","), strict=True)
                  if w == here)  # fmt: skip
    acknowledged: list[tuple[str, str]] = []
    refused = 0
    stop = threading.Event()
    lock = threading.Lock()

    def writer(k: int) -> None:
        nonlocal refused
        i = 0
        while not stop.is_set():
            user = users[(k + i) % len(users)]
            try:
                ids = mem.add(user, chat(f"{user} writer {k} add {i}", "ok")).block_ids
            except StoreError:
                with lock:
                    refused += 1
                time.sleep(0.05)
            else:
                with lock:
                    acknowledged.extend((user, b) for b in ids)
            i += 1

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    server = PgServer(Path(folder), pg_ctl)
    try:
        time.sleep(1.0)
        server.crash()
        time.sleep(1.5)
    finally:
        server.start()
    deadline = time.monotonic() + 30
    while True:  # the writers carry on by themselves once the worker is back
        with lock:
            before = len(acknowledged)
        time.sleep(1.0)
        with lock:
            if len(acknowledged) > before + 10:
                break
        assert time.monotonic() < deadline, "the adds did not resume"
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert refused > 0, "the crash happened between adds: nothing was tested"
    for user in users:
        stored = {b.id for b in mem.list(user, limit=10_000)}
        assert {b for u, b in acknowledged if u == user} <= stored, f"acknowledged adds of {user} lost"
    assert store.integrity_check() == []
