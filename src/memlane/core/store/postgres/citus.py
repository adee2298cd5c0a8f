"""memlane on a distributed PostgreSQL (Citus): every Citus-specific statement of the store is here.

A store opened on a Citus coordinator (the ``citus`` extension in its database) is distributed on first use,
right after its migrations: the per-user tables by ``user_id`` (``users`` by ``id``), all in one co-location
group, so that a user's rows of every table lie on one node and an operation naming one user runs there as
one local transaction; the small tables every user shares as reference tables (a copy on every node); the
embedding cache, keyed by content hash and shared by users, by its hash in a group of its own.
:func:`distribute` does the same to a store holding data (``memlane citus distribute``): Citus copies each
table's rows into its shards, then the coordinator's local copies are emptied.

Where users live and how they move (:func:`placements`, :func:`isolate_user`, :func:`move_shard`,
:func:`rebalance`) uses Citus's own functions; memlane keeps no placement of its own.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memlane.core.errors import ConfigError, StoreError, ValidationError
from memlane.core.store.check import StoreCheck
from memlane.core.store.postgres import ann, delegated
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.schema import MIGRATION_LOCK
from memlane.core.store.postgres.tenant import user_key

if TYPE_CHECKING:
    from memlane.core.store.postgres.base import PostgresBase

T = TypeVar("T")
log = logging.getLogger(__name__)

# Co-located with ``users`` (distributed by ``id``), each by its ``user_id``; in an order where every table a
# foreign key points to is distributed before the table that points to it.
USER_TABLES: tuple[str, ...] = (
    "blocks",
    "search_keys",
    "key_vectors",
    "jobs",
    "sessions",
    "session_terms",
    "session_lengths",
    "retention_policies",
    "llm_calls",
)
# Small, shared by every user, written rarely: a copy on every node, so any node joins them locally.
REFERENCE_TABLES: tuple[str, ...] = (
    "meta",
    "deletion_epoch",
    "user_deletions",
    "retention_default",
    "prompts",
    "prompt_versions",
    "api_keys",
)
# Shared by users and keyed by content: distributed by its own key, in a co-location group of its own.
HASHED_TABLES: tuple[tuple[str, str], ...] = (("embed_cache", "hash"),)


def is_coordinator(conn: Conn) -> bool:
    """Whether this database is a Citus coordinator: the extension is installed and this node holds the
    cluster's metadata (a worker's database has the extension too, but memlane talks to the coordinator)."""
    row = conn.execute("SELECT to_regproc('citus_is_coordinator') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return False
    row = conn.execute("SELECT citus_is_coordinator()").fetchone()
    return bool(row and row[0])


def distribute_on_first_use(conn: Conn, *, with_data: bool = False) -> tuple[bool, Distributed | None]:
    """On a Citus coordinator, distribute the store's tables unless they are already (under the migrations'
    lock, so processes opening a new store together distribute it once): whether the store is on Citus,
    and what was distributed now, if anything. A store that holds data is distributed only ``with_data``
    (``memlane shards distribute``: Citus copies every row, which takes a while and is not to happen behind
    an operator's back); otherwise ConfigError says so. The caller's connection is between transactions;
    this commits."""
    if not is_coordinator(conn):
        conn.rollback()
        return False, None
    with conn.transaction():
        conn.execute(MIGRATION_LOCK)
        if is_distributed(conn):
            delegated.install(conn)  # a store distributed by a release before its functions gets them
            return True, None
        held = conn.execute("SELECT EXISTS (SELECT 1 FROM users)").fetchone()
        if held and held[0] and not with_data:
            raise ConfigError(
                "this store holds data on a Citus coordinator but is not distributed yet: run "
                "`memlane shards distribute` to distribute it in place (docs/scaling.md)"
            )
        done = distribute(conn)
        delegated.install(conn)
        return True, done


def is_distributed(conn: Conn) -> bool:
    """Whether this store's tables (on the search path) are distributed already."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('users'))"
    ).fetchone()
    return bool(row and row[0])


@dataclass(frozen=True)
class Distributed:
    """What :func:`distribute` did: the tables by kind, the rows Citus copied into shards, and how long it
    took."""

    user_tables: tuple[str, ...]
    reference_tables: tuple[str, ...]
    hashed_tables: tuple[str, ...]
    rows_moved: int
    seconds: float


def _exists(conn: Conn, table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


def _rows(conn: Conn, table: str) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
    return int(row[0]) if row else 0


def distribute(conn: Conn, *, shard_count: int | None = None) -> Distributed:
    """Distribute the store's tables (on the search path), inside the caller's transaction.

    Two constraints of a single server are ones Citus refuses and go first: the unique index on user names
    (a unique index of a distributed table must hold its distribution column; a name's id is the hash of the
    name, so the primary key keeps names unique: :mod:`memlane.core.store.postgres.tenant`), replaced by a
    plain index for listings, and the foreign key from ``api_keys`` (a reference table) to ``users`` (a
    reference table may not point into a distributed one; ``delete_user`` deletes a user's keys itself).
    Foreign keys between co-located tables, and from them to reference tables, stay."""
    started = time.monotonic()
    conn.execute("ALTER TABLE users DROP CONSTRAINT IF EXISTS users_name_key")
    conn.execute("CREATE INDEX IF NOT EXISTS users_name ON users(name)")
    conn.execute("ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_user_id_fkey")
    # Each create_distributed_table in this transaction copies rows over its own connections per shard
    # unless told to use one: a later statement of the transaction must see them.
    conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
    if shard_count is not None:
        conn.execute(sql.SQL("SET LOCAL citus.shard_count TO {}").format(sql.Literal(int(shard_count))))
    moved = 0
    done: list[str] = []
    for table in REFERENCE_TABLES:
        moved += _rows(conn, table)
        conn.execute("SELECT create_reference_table(%s)", (table,))
        done.append(table)
    moved += _rows(conn, "users")
    # A co-location group of its own: another store (schema) of the database is moved and split apart.
    conn.execute("SELECT create_distributed_table('users', 'id', colocate_with => 'none')")
    users = ["users"]
    for table in USER_TABLES:
        if not _exists(conn, table):
            continue
        moved += _rows(conn, table)
        conn.execute("SELECT create_distributed_table(%s, 'user_id', colocate_with => 'users')", (table,))
        users.append(table)
    hashed = []
    for table, column in HASHED_TABLES:
        moved += _rows(conn, table)
        conn.execute("SELECT create_distributed_table(%s, %s, colocate_with => 'none')", (table, column))
        hashed.append(table)
    # The rows are in the shards now; the coordinator's own copies of them go (they would otherwise stay in
    # its files, unreachable but not deleted: a deleted user's words among them).
    for table in [*done, *users, *hashed]:
        conn.execute("SELECT truncate_local_data_after_distributing_table(%s)", (table,))
    return Distributed(tuple(users), tuple(done), tuple(hashed), moved, time.monotonic() - started)


@dataclass(frozen=True)
class Placement:
    """Where one shard of the users' co-location group lives."""

    shard_id: int
    node: str  # host:port of the worker holding it
    users: int
    bytes: int  # of the shard's tables on that node, all co-located tables together
    min_key: int
    max_key: int


def placements(conn: Conn) -> list[Placement]:
    """Every shard of the users' group with its node, its users and its size (``memlane citus shards``)."""
    rows = conn.execute(
        """
        SELECT s.shardid, p.nodename || ':' || p.nodeport, s.shardminvalue::bigint, s.shardmaxvalue::bigint,
            (SELECT coalesce(sum(c.shard_size), 0) FROM citus_shards c
             WHERE c.colocation_id = t.colocationid AND c.shardid IN (
                 SELECT s2.shardid FROM pg_dist_shard s2 JOIN pg_dist_partition t2 USING (logicalrelid)
                 WHERE t2.colocationid = t.colocationid AND s2.shardminvalue = s.shardminvalue))
        FROM pg_dist_shard s JOIN pg_dist_partition t USING (logicalrelid)
        JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node p ON p.groupid = pl.groupid
        WHERE s.logicalrelid = to_regclass('users')
        ORDER BY s.shardminvalue::bigint
        """
    ).fetchall()
    counts: dict[int, int] = {}
    for shard, n in conn.execute(
        "SELECT get_shard_id_for_distribution_column('users', id), count(*) FROM users GROUP BY 1"
    ).fetchall():
        counts[int(shard)] = int(n)
    return [Placement(int(r[0]), str(r[1]), counts.get(int(r[0]), 0), int(r[4]), int(r[2]), int(r[3])) for r in rows]


def user_shard(conn: Conn, user_id: int) -> tuple[int, str]:
    """The shard holding ``user_id``'s rows and its node (host:port)."""
    row = conn.execute(
        "SELECT s.shardid, n.nodename || ':' || n.nodeport FROM pg_dist_shard s "
        "JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n ON n.groupid = p.groupid "
        "WHERE s.shardid = get_shard_id_for_distribution_column('users', %s::bigint)",
        (user_id,),
    ).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def nodes(conn: Conn) -> list[str]:
    """The active workers (host:port)."""
    rows = conn.execute(
        "SELECT nodename || ':' || nodeport FROM pg_dist_node WHERE noderole = 'primary' AND isactive "
        "AND shouldhaveshards ORDER BY nodename, nodeport"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _host_port(node: str) -> tuple[str, int]:
    host, _, port = node.rpartition(":")
    return host, int(port)


def isolate_user(conn: Conn, user_id: int, *, mode: str) -> int:
    """Give the user a shard of their own (every co-located table's rows of that one id), on the node that
    held them; returns the new shard's id (``isolate_tenant_to_new_shard``)."""
    row = conn.execute(
        "SELECT isolate_tenant_to_new_shard('users', %s::bigint, 'CASCADE', shard_transfer_mode => %s)",
        (user_id, mode),
    ).fetchone()
    assert row is not None
    return int(row[0])


def move_shard(conn: Conn, shard_id: int, target: str, *, mode: str) -> str:
    """Move a shard (with its co-located shards) to the worker ``target`` (host:port); returns the node it
    left (``citus_move_shard_placement``)."""
    source = conn.execute(
        "SELECT n.nodename || ':' || n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid "
        "WHERE p.shardid = %s",
        (shard_id,),
    ).fetchone()
    if source is None:
        raise LookupError(f"no shard {shard_id}")
    src_host, src_port = _host_port(str(source[0]))
    dst_host, dst_port = _host_port(target)
    conn.execute(
        "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, shard_transfer_mode => %s)",
        (shard_id, src_host, src_port, dst_host, dst_port, mode),
    )
    return str(source[0])


def rewrite_shard(conn: Conn, user_id: int, *, mode: str) -> tuple[int, str, str]:
    """Move the shard that holds (or held) ``user_id``'s rows to another worker, then drop the old copy now:
    Citus copies only live rows, so the bytes of rows deleted there (a deleted user's words, which a
    DELETE and even VACUUM leave in the pages' free space) go with the old files; and rewrite ``api_keys``
    (copied to every node) the same way. (shard, from, to)."""
    shard, source = user_shard(conn, user_id)
    others = [n for n in nodes(conn) if n != source]
    if not others:
        raise ConfigError("the shard can only be rewritten onto another worker, and the cluster has one")
    sizes = {
        str(node): int(size or 0)
        for node, size in conn.execute(
            "SELECT nodename || ':' || nodeport, sum(shard_size) FROM citus_shards GROUP BY 1"
        ).fetchall()
    }
    target = min(others, key=lambda n: (sizes.get(n, 0), n))
    move_shard(conn, shard, target, mode=mode)
    conn.execute("CALL citus_cleanup_orphaned_resources()")
    # The one reference table that held words of the user's (an API key's label): small, rewritten whole.
    conn.execute("VACUUM FULL api_keys")
    return shard, source, target


def add_node(conn: Conn, node: str) -> int:
    """Add a worker (``citus_add_node``); its node id. Writers go on: the new node holds no shard until
    shards are moved there (:func:`rebalance`)."""
    host, port = _host_port(node)
    row = conn.execute("SELECT citus_add_node(%s, %s)", (host, port)).fetchone()
    assert row is not None
    return int(row[0])


def rebalance(conn: Conn, *, mode: str) -> list[tuple[int, str, str]]:
    """Move shards until the workers hold about as much (Citus's rebalancer, by disk size); the moves made
    as (shard, from, to)."""
    plan = conn.execute(
        "SELECT shardid, sourcename || ':' || sourceport, targetname || ':' || targetport "
        "FROM get_rebalance_table_shards_plan()"
    ).fetchall()
    conn.execute("SELECT rebalance_table_shards(shard_transfer_mode => %s)", (mode,))
    return [(int(r[0]), str(r[1]), str(r[2])) for r in plan]


def shard_relations(conn: Conn, tables: Sequence[str]) -> list[str]:
    """The shard tables of ``tables`` (for a check that reads a worker's own files)."""
    rows = conn.execute(
        "SELECT shard_name(logicalrelid, shardid) FROM pg_dist_shard WHERE logicalrelid = ANY(%s::regclass[])",
        (list(tables),),
    ).fetchall()
    return [str(r[0]) for r in rows]


# -- large users' approximate indexes, on the shard that holds each of them --------------------------------


@contextmanager
def worker(store: PostgresBase, node: str) -> Iterator[Conn]:
    """A connection (autocommit) to the worker ``node`` (host:port, as the coordinator's metadata names it)
    with the store's credentials and search path, seeing the shards (which Citus hides from other clients'
    catalog reads). What an index on one shard is made and read through."""
    host, port = _host_port(node)
    params = conninfo_to_dict(store.url)
    params.pop("hostaddr", None)
    params.update(host=host, port=str(port))
    try:
        with psycopg.connect(make_conninfo("", **params), autocommit=True, connect_timeout=30) as conn:
            if store.search_path:
                conn.execute(f"SET search_path TO {store.search_path}")
            conn.execute("SET citus.override_table_visibility TO off")
            yield conn
    except psycopg.Error as exc:
        raise StoreError(f"database operation failed on the worker {node}: {exc}") from exc


def ann_place(store: PostgresBase, user_id: int) -> ann.Place:
    """Where the user's approximate index belongs: the shard of ``key_vectors`` that holds the user now, on
    its worker, the index named with the shard (what the search function looks for)."""
    with store.single() as conn:
        row = conn.execute(
            "SELECT s.shardid, shard_name(s.logicalrelid, s.shardid), n.nodename || ':' || n.nodeport "
            "FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) "
            "JOIN pg_dist_node n ON n.groupid = p.groupid "
            "WHERE s.shardid = get_shard_id_for_distribution_column('key_vectors', %s::bigint)",
            (user_id,),
        ).fetchone()
    assert row is not None
    shard, table, node = int(row[0]), str(row[1]), str(row[2])
    return ann.Place(lambda: worker(store, node), sql.SQL(table), ann_index(user_id, shard))


def ann_index(user_id: int, shard: int) -> str:
    """The name of the user's index on the shard ``shard`` of ``key_vectors``."""
    return f"{ann.index_name(user_id)}_{shard}"


_ANN_INDEX = re.compile(rf"^{ann.index_name(0).removesuffix('0')}(\d+)_(\d+)$")


def ann_report(store: PostgresBase) -> StoreCheck:
    """The large users' indexes across the workers (``memlane check``). A user at or past the threshold whose
    shard has no usable index (the shard was moved or split since the index was made, or it is not made yet)
    is a note: searched exactly until the next search makes it. An index whose user is gone, or that is not
    on its user's shard, is a problem (it keeps a copy of the vectors it was made from), unless its shard is
    one Citus left behind a move or a split and is about to drop."""
    with store.single() as conn:
        users = {int(i): (str(name), int(n)) for i, name, n in conn.execute("SELECT id, name, n_keys FROM users")}
        shards = {
            int(i): (int(s), str(node))
            for i, s, node in conn.execute(
                "SELECT u.id, s.shardid, n.nodename || ':' || n.nodeport FROM users u "
                "JOIN pg_dist_shard s ON s.shardid = get_shard_id_for_distribution_column('key_vectors', u.id) "
                "JOIN pg_dist_placement p ON p.shardid = s.shardid JOIN pg_dist_node n ON n.groupid = p.groupid"
            )
        }
        leaving = {str(r[0]).rsplit(".", 1)[-1] for r in conn.execute("SELECT object_name FROM pg_dist_cleanup")}
    usable: set[int] = set()
    problems: list[str] = []
    for node in Cluster(store).nodes():
        with worker(store, node) as conn:
            rows = conn.execute(
                "SELECT c.relname, t.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_class t ON t.oid = i.indrelid "
                "WHERE c.relnamespace = current_schema()::regnamespace AND starts_with(c.relname, %s)",
                (ann.index_name(0).removesuffix("0"),),
            ).fetchall()
        for name, table, valid in rows:
            m = _ANN_INDEX.match(str(name))
            if m is None or str(table) in leaving:
                continue
            user_id, shard = int(m.group(1)), int(m.group(2))
            if user_id not in users:
                problems.append(f"index {name} on {node}: its user was deleted (drop it: it holds their vectors)")
            elif shards[user_id] != (shard, node):
                problems.append(f"index {name} on {node}: not on its user's shard (drop it)")
            elif valid:
                usable.add(user_id)
    notes = [
        f"user {name!r} ({n} keys) has no usable approximate index on its shard: searched exactly until the next "
        "search (or `memlane index build`) makes it"
        for user_id, (name, n) in sorted(users.items(), key=lambda kv: kv[1][0])
        if store.ann_settings.applies(n) and user_id not in usable
    ]
    return StoreCheck(("the large users' approximate indexes, on their shards",), tuple(problems), tuple(notes))


def drop_ann(store: PostgresBase, user_id: int) -> None:
    """After the user's deletion: drop their index from the shard that held them (on one server the deletion
    drops it in its own transaction; a worker's index is out of its reach). A failure is logged; ``memlane
    check`` reports an index left so."""
    place = ann_place(store, user_id)
    try:
        with place.connect() as conn:
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(place.index)))
    except StoreError as exc:
        log.warning("the approximate index of a deleted user was not dropped: %s", exc)


# How Citus copies a shard: ``auto`` (logical replication where every table has a replica identity, which
# memlane's all have: writers go on, and wait only for the final switch), ``force_logical`` or
# ``block_writes`` (writes to the shard's users wait for the whole copy).
TRANSFER_MODES = ("auto", "force_logical", "block_writes")
# A split (isolating a user) blocks the shard's writes by default: with Citus 13.2 on PostgreSQL 15 an
# online split whose source and new shards share a node stopped at the first UPDATE of a split table
# ("publisher did not send replica identity column expected by the logical replication target relation",
# in the worker's log) and then waited for the replication timeout. Moves between nodes are online.
ISOLATE_MODE = "block_writes"


def _retried(operation: Callable[[], T], store: PostgresBase, *, tries: int = 10, wait_s: float = 1.0) -> T:
    """``operation``, tried again while Citus cannot take the lock it needs to split or move a shard right now
    (autovacuum of a shard, under writers, holds the same lock for a moment); after a failure, what the
    failed attempt left (replication slots, publications, half-made shards) is cleaned up."""
    for attempt in range(tries):
        try:
            return operation()
        except StoreError as exc:
            with store.dedicated() as conn:
                conn.execute("CALL citus_cleanup_orphaned_resources()")
            if "could not acquire the lock" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(wait_s)
    raise AssertionError("unreachable")


class Cluster:
    """The Citus operations of ``memlane shards``, on an open store (a coordinator's)."""

    def __init__(self, store: PostgresBase) -> None:
        if not store.citus:
            raise ConfigError(
                "this store is not on Citus: memlane shards works on a Citus coordinator's database "
                "(docs/scaling.md); `memlane shards distribute` distributes a store there"
            )
        self.store = store

    def placements(self) -> list[Placement]:
        with self.store.transaction() as conn:
            return placements(conn)

    def where(self, user: str) -> tuple[int, str]:
        with self.store.transaction() as conn:
            return user_shard(conn, user_key(user))

    def nodes(self) -> list[str]:
        with self.store.transaction() as conn:
            return nodes(conn)

    def isolate(self, user: str, mode: str = ISOLATE_MODE) -> int:
        def run() -> int:
            with self.store.dedicated() as conn:
                return isolate_user(conn, user_key(user), mode=_mode(mode))

        return _retried(run, self.store)

    def move(self, shard_id: int, target: str, mode: str = "auto") -> str:
        def run() -> str:
            with self.store.dedicated() as conn:
                return move_shard(conn, shard_id, target, mode=_mode(mode))

        return _retried(run, self.store)

    def erase(self, user: str, mode: str = "auto") -> tuple[int, str, str]:
        def run() -> tuple[int, str, str]:
            with self.store.dedicated() as conn:
                return rewrite_shard(conn, user_key(user), mode=_mode(mode))

        return _retried(run, self.store)

    def add_node(self, node: str) -> int:
        with self.store.autocommit() as conn:
            return add_node(conn, node)

    def rebalance(self, mode: str = "auto") -> list[tuple[int, str, str]]:
        with self.store.dedicated() as conn:
            return rebalance(conn, mode=_mode(mode))


def _mode(mode: str) -> str:
    if mode not in TRANSFER_MODES:
        raise ValidationError(f"must be one of {', '.join(TRANSFER_MODES)}, not {mode!r}", where="mode")
    return mode
