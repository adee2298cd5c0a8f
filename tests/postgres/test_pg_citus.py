"""The PostgreSQL store on a Citus cluster ($MEMLANE_TEST_CITUS_URL: a coordinator and two workers, which
.ci/citus.sh starts and exports): how it is distributed, a store distributed in place, a deleted user gone
from every node's files, and users' shards isolated and moved while writers and searches go on."""

from __future__ import annotations

import glob
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import ConfigError, StoreError
from memlane.core.memory import Memory
from memlane.core.model import KeyRecord
from memlane.core.store.postgres import citus
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.postgres.tenant import user_key
from memlane.interfaces.cli.app import cli, register_all

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
register_all()
NewStore = Callable[..., PostgresStore]


@pytest.fixture
def workers() -> list[str]:
    return [u for u in os.environ.get("MEMLANE_TEST_CITUS_WORKER_URLS", "").split(",") if u]


def chat(*lines: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def test_a_new_store_is_distributed_by_user_with_the_shared_tables_on_every_node(new_citus_store: NewStore) -> None:
    store = new_citus_store()
    assert store.citus
    rows = store.query(
        "SELECT logicalrelid::regclass::text, partmethod, colocationid FROM pg_dist_partition "
        "WHERE logicalrelid::regclass::text NOT LIKE '%%.%%'"
    )
    kinds = {name: (method, group) for name, method, group in rows}
    users_group = kinds["users"][1]
    assert {t for t, (m, g) in kinds.items() if m == "h" and g == users_group} == {"users", *citus.USER_TABLES}
    assert {t for t, (m, _) in kinds.items() if m == "n"} == set(citus.REFERENCE_TABLES)
    assert kinds["embed_cache"][0] == "h" and kinds["embed_cache"][1] != users_group
    # another store of the database is a co-location group of its own: isolating or moving one leaves the other
    assert new_citus_store().query(
        "SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'users'::regclass"
    ) != [(users_group,)]


def test_a_store_with_data_is_distributed_in_place_by_the_command(
    citus_url: str, monkeypatch: pytest.MonkeyPatch, new_citus_store: NewStore
) -> None:
    """A store filled on a single server (here: the coordinator before it knew of Citus) keeps every row and
    ranks as before once `memlane shards distribute` has distributed it; until then memlane refuses to
    open it, saying which command to run."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    with monkeypatch.context() as plain:
        plain.setattr(citus, "is_coordinator", lambda conn: False)
        store = PostgresStore(citus_url, schema=schema)
        mem = Memory(store, HashingEmbedder())
        for user in ("ann", "bo", "cy"):
            for s in range(4):
                mem.add(user, chat(f"{user} planted {s} tulips", "lovely"), session_id=f"s{s}")
        store.add_api_key(KeyRecord(key_id="key-bo", user="bo", label="", created_at=1.0), "0" * 64)
        before = {u: [h.block.id for h in mem.search(u, "tulips", k=3)] for u in ("ann", "bo", "cy")}
        rows = int(store.query("SELECT count(*) FROM blocks")[0][0])
        store.close()
    with pytest.raises(ConfigError, match="memlane shards distribute"):
        PostgresStore(citus_url, schema=schema)
    url = f"{citus_url}?options=-csearch_path%3D{schema}"
    res = CliRunner().invoke(cli, ["shards", "distribute", "--store", url, "--json"])
    assert res.exit_code == 0, res.output

    report = json.loads(res.stdout)
    assert report["distributed"] and report["rows_moved"] > rows and report["seconds"] > 0
    again = new_citus_store(schema=schema)
    assert again.citus and int(again.query("SELECT count(*) FROM blocks")[0][0]) == rows
    mem = Memory(again, HashingEmbedder())
    assert {u: [h.block.id for h in mem.search(u, "tulips", k=3)] for u in before} == before
    key = again.get_api_key("key-bo")
    assert key is not None and key.record.user == "bo"
    assert again.integrity_check() == []
    # the coordinator's own copies were emptied (its migrations table alone stays there)
    with psycopg.connect(citus_url) as conn:
        conn.execute("SET citus.enable_manual_changes_to_shards TO on")
        local = conn.execute(
            "SELECT sum(pg_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname <> 'schema_migrations'",
            (schema,),
        ).fetchone()
    assert local == (0,)


def _data_files_holding(word: bytes, urls: list[str], folders: list[str]) -> list[tuple[str, str | None]]:
    """The files under each node's ``base`` folder whose bytes hold ``word`` (after a checkpoint on every node),
    with the relation each one is (``urls`` and ``folders`` in the same order)."""
    for url in urls:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    found = []
    for url, folder in zip(urls, folders, strict=True):
        for f in glob.glob(f"{folder}/base/**", recursive=True):
            if os.path.isfile(f) and word in Path(f).read_bytes():
                node = int(Path(f).name.split(".")[0].split("_")[0])
                with psycopg.connect(url) as conn:
                    row = conn.execute("SELECT pg_filenode_relation(0, %s)::text", (node,)).fetchone()
                found.append((f, None if row is None else row[0]))
    return found


def test_a_deleted_user_leaves_no_row_on_any_node_and_no_byte_once_erased(
    citus_url: str, workers: list[str], new_citus_store: NewStore
) -> None:
    folders = [d for d in os.environ.get("MEMLANE_TEST_CITUS_WORKER_DATA", "").split(",") if d]
    if len(workers) < 2 or len(folders) < 2:
        pytest.skip("needs the workers' URLs and data folders (.ci/citus.sh exports them)")
    store = new_citus_store()
    mem = Memory(store, HashingEmbedder())
    word = f"zq{uuid.uuid4().hex[:12]}"
    for user in ("ann", "cy"):
        mem.add(user, chat(f"{user} likes tea", "fine"))
    mem.add("bo", chat(f"my secret word is {word}", f"noted: {word}"))
    store.add_api_key(KeyRecord(key_id="key-bo", user="bo", label=word, created_at=1.0), "0" * 64)
    log = store.own_call_log()
    from memlane.core.llm.calllog import CallEntry

    log.record(CallEntry("m", "extract", "bo", "h", "k", f'{{"w": "{word}"}}', word, 1, 1, 1.0, None, 1, False, 0))
    mem.delete_user("bo")
    assert store.user_row_counts("bo") == dict.fromkeys(store.user_row_counts("bo"), 0)
    tables = ("users", *citus.USER_TABLES)
    with store.transaction() as conn:
        shards = citus.shard_relations(conn, tables)
    uid = user_key("bo")
    for url in workers:  # each worker's own shard tables, read directly
        with psycopg.connect(url) as conn:
            conn.execute(f"SET search_path TO {store.schema}")
            here = [r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", (shards,))]
            for shard in here:
                column = "id" if shard.startswith("users_") else "user_id"
                assert conn.execute(f"SELECT count(*) FROM {shard} WHERE {column} = %s", (uid,)).fetchone() == (0,)
                if shard.startswith(("blocks_", "search_keys_", "llm_calls_")):
                    text = "message" if shard.startswith("blocks_") else "text" if "keys" in shard else "request"
                    hit = conn.execute(f"SELECT count(*) FROM {shard} WHERE {text} LIKE %s", (f"%{word}%",))
                    assert hit.fetchone() == (0,)
    res = CliRunner().invoke(
        cli, ["shards", "erase", "bo", "--store", f"{citus_url}?options=-csearch_path%3D{store.schema}"]
    )
    assert res.exit_code == 0, res.output
    assert _data_files_holding(word.encode(), workers, folders) == []
    assert {h.block.message for h in mem.search("ann", "tea", k=3)} == {"user: ann likes tea\nassistant: fine"}


def test_a_large_user_is_isolated_and_moved_while_four_writers_add_and_searches_stay_right(
    new_citus_store: NewStore,
) -> None:
    """Isolating a user into a shard of their own (its writers wait for the split) and moving it to the other
    worker (online: logical replication), while four threads keep adding to that user: every add
    acknowledged is there afterwards, and a search during and after finds the user's blocks and no one
    else's."""
    store = new_citus_store(pool_max=8)
    mem = Memory(store, HashingEmbedder())
    rng_words = ["apple", "river", "stone", "cloud", "tiger", "lemon", "violin", "garden", "rocket", "candle"]
    batch = [chat(f"big note {i} {rng_words[i % 10]} {rng_words[(i * 7) % 10]}", "ok") for i in range(400)]
    from memlane.core.memory import AddRequest

    mem.add_many([AddRequest("big", m, session_id=f"s{i // 50}") for i, m in enumerate(batch)])
    mem.add("small", chat("small user talks about a violin", "ok"))
    acknowledged: list[list[str]] = [[] for _ in range(4)]
    failures: list[str] = []
    stop = threading.Event()

    def writer(k: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                res = mem.add("big", chat(f"writer {k} line {i} violin", "ok"))
                acknowledged[k].extend(res.block_ids)
            except StoreError as exc:  # an add refused is not acknowledged; it must not be lost either
                failures.append(str(exc))
            i += 1

    def search_ok() -> bool:
        hits = mem.search("big", "violin", k=5)
        return len(hits) == 5 and all(h.block.user == "big" for h in hits)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        cluster = citus.Cluster(store)
        shard, node = cluster.where("big")
        isolated = cluster.isolate("big")
        assert isolated != shard and cluster.where("big") == (isolated, node)
        assert search_ok()
        target = next(n for n in cluster.nodes() if n != node)
        assert cluster.move(isolated, target) == node
        assert cluster.where("big") == (isolated, target)
        assert search_ok()
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    ids = {str(r[0]) for r in store.query("SELECT id FROM blocks WHERE user_id = %s", (user_key("big"),))}
    added = [i for k in acknowledged for i in k]
    assert added and set(added) <= ids, "acknowledged adds lost"
    assert len(ids) == store.count_blocks("big")
    assert search_ok() and [h.block.user for h in mem.search("small", "violin", k=5)] == ["small"]
    assert store.integrity_check() == []
    # Adds refused while a shard's metadata switched (a statement planned against the shard replaced under
    # it; a deadlock, local or across nodes, between writers whose transactions began before the switch and
    # ended after it) are errors the client sees and may retry; none was acknowledged, so none is lost.
    transient = ("deadlock", "could not find valid entry for shard")
    other = [f for f in failures if not any(t in f for t in transient)]
    assert not other, "\n".join(other[:3])


def test_a_worker_restart_fails_its_users_cleanly_and_loses_nothing(
    workers: list[str], new_citus_store: NewStore
) -> None:
    data = [d for d in os.environ.get("MEMLANE_TEST_CITUS_WORKER_DATA", "").split(",") if d]
    pg_ctl = os.environ.get("MEMLANE_TEST_PG_CTL_CITUS")
    if not data or not pg_ctl:
        pytest.skip("needs the workers' data folders and pg_ctl (.ci/citus.sh exports them)")
    from pg_control import PgServer

    store = new_citus_store(timeout_s=5)
    mem = Memory(store, HashingEmbedder())
    users = [f"user{i}" for i in range(12)]
    for user in users:
        mem.add(user, chat(f"{user} first note", "ok"))
    cluster = citus.Cluster(store)
    on = {u: cluster.where(u)[1] for u in users}
    down_node = sorted(set(on.values()))[0]
    port = down_node.rsplit(":", 1)[1]
    folder = next(d for d, w in zip(data, workers, strict=True) if f":{port}/" in w)
    server = PgServer(Path(folder), pg_ctl)
    server.crash()
    try:
        for user in users:
            if on[user] == down_node:
                with pytest.raises(StoreError):
                    mem.add(user, chat(f"{user} while down", "ok"))
            else:
                mem.add(user, chat(f"{user} while down", "ok"))
    finally:
        server.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            for user in users:
                mem.add(user, chat(f"{user} after", "ok"))
            break
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    for user in users:
        texts = {b.message for b in mem.list(user)}
        assert f"user: {user} first note\nassistant: ok" in texts and f"user: {user} after\nassistant: ok" in texts
        assert (f"user: {user} while down\nassistant: ok" in texts) == (on[user] != down_node)
    assert store.integrity_check() == []
