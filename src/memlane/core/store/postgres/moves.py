"""Moving a user from one shard to another without losing anything, even when interrupted.

The steps, each a transaction of its own, each safe to interrupt (a rerun of :func:`move_user` looks at
what is recorded and carries on from there):

1. **freeze** — on the source, lock the user's row and record ``shard_moves(user, 'moving', target)``. Every
   write of the user on the source takes that row lock first and then checks for the record, so writes
   either committed before (and are copied) or are refused with UserMovingError (a StoreError: HTTP 503,
   "retry"). The user's extraction jobs there are fenced: running ones lose their lease (a late completion
   writes nothing, as after any lost lease) and none can be claimed (``run_after`` pushed ahead by
   :data:`FENCE_S`, given back in the copy).
2. **copy** — on the target, in one transaction: remove what an interrupted earlier copy left, then copy the
   user's rows of every table, with new row ids from the target's sequences.
3. **verify** — the target's rows must equal the source's (counts and digests of the content of each
   table), or the move stops with an error and changes nothing further.
4. **switch** — the user's home shard records the target in ``shard_map`` (or forgets the user, when the
   target is the home). From here on routers send the user to the target.
5. **drain** — wait :data:`~memlane.core.store.postgres.sharded.ROUTE_TTL_S` and a margin, so every router
   has given up its remembered route: reads that still go to the source find the (frozen) copy there.
6. **clean** — on the source, in one transaction: delete the user's rows (and the cached vectors of their
   texts that no other user there shares) and record
   ``shard_moves(user, 'moved', target)``, which sends a stale write on to the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from memlane.core.errors import ConfigError, NotFoundError, StoreError
from memlane.core.store.postgres import ann
from memlane.core.store.postgres.keys import Conn, next_ids
from memlane.core.store.postgres.shard import MOVED, MOVING, ShardStore
from memlane.core.store.postgres.sharded import ROUTE_TTL_S, ShardedStore

FENCE_S = 1e10  # pushes a frozen user's jobs past any claim (~300 years); taken off again by the copy
DRAIN_S = ROUTE_TTL_S + 5.0
STEPS = ("freeze", "copy", "verify", "switch", "drain", "clean")

# Every table that holds a user's rows (besides ``users``), in the order they are copied (parents first).
USER_TABLES = (
    "sessions",
    "blocks",
    "search_keys",
    "key_vectors",
    "jobs",
    "session_terms",
    "session_lengths",
    "api_keys",
    "retention_policies",
)
# Digests that say two copies hold the same content (the row ids differ by design).
_DIGESTS = {
    "users": "SELECT md5(string_agg(concat_ws('|', u.n_keys, u.total_len, u.created_at, u.display_name, "
    "u.metadata::text), ',')) FROM users u "
    "WHERE u.id = %(uid)s",
    "blocks": "SELECT md5(string_agg(concat_ws('|', b.id, b.message, b.summary, b.contexts::text, b.event_ts, "
    "b.extraction_status, b.content_hash, b.annotations::text, b.kind, b.sides::text, b.ttl_s, b.expires_ts, "
    "b.updated_ts, b.prompt_id, b.prompt_version, b.fail_count, b.last_queued_ts), ',' ORDER BY b.id)) FROM blocks b "
    "WHERE b.user_id = %(uid)s",
    "search_keys": "SELECT md5(string_agg(concat_ws('|', b.id, k.kind, k.text, k.dl, k.tsv::text), ',' "
    "ORDER BY b.id, k.kind, k.text)) FROM search_keys k JOIN blocks b ON b.user_id = k.user_id AND b.pk = k.block_pk "
    "WHERE k.user_id = %(uid)s",
    "key_vectors": "SELECT md5(string_agg(concat_ws('|', b.id, k.kind, k.text, v.embedding::text), ',' "
    "ORDER BY b.id, k.kind, k.text)) FROM key_vectors v "
    "JOIN search_keys k ON k.user_id = v.user_id AND k.pk = v.key_pk "
    "JOIN blocks b ON b.user_id = v.user_id AND b.pk = v.block_pk "
    "WHERE v.user_id = %(uid)s",
    "jobs": "SELECT md5(string_agg(concat_ws('|', b.id, j.kind, j.attempts, j.max_attempts, j.last_error), ',' "
    "ORDER BY b.id, j.created_at)) FROM jobs j JOIN blocks b ON b.user_id = j.user_id AND b.pk = j.block_pk "
    "WHERE j.user_id = %(uid)s",
    "sessions": "SELECT md5(string_agg(concat_ws('|', session_id, conversation_id, started_at, ended_at, "
    "annotations::text, metadata::text, default_ttl_s, created_at), ',' ORDER BY session_id)) FROM sessions "
    "WHERE user_id = %(uid)s",
    "session_terms": "SELECT md5(string_agg(concat_ws('|', lexeme, session_id, tf), ',' ORDER BY lexeme, session_id)) "
    "FROM session_terms WHERE user_id = %(uid)s",
    "session_lengths": "SELECT md5(string_agg(concat_ws('|', session_id, words), ',' ORDER BY session_id)) "
    "FROM session_lengths WHERE user_id = %(uid)s",
    "api_keys": "SELECT md5(string_agg(concat_ws('|', key_id, secret_sha256, label, created_at), ',' "
    "ORDER BY key_id)) FROM api_keys WHERE user_id = %(uid)s",
}


@dataclass(frozen=True)
class MoveReport:
    user: str
    source: int
    target: int
    rows: dict[str, int]
    steps: tuple[str, ...]  # the steps this run did (a rerun after an interruption does the rest)


class Interrupted(Exception):
    """Raised by a test's ``after_step`` hook to stop a move between two steps."""


def _user_id(conn: Conn, user: str, *, lock: bool = False) -> int | None:
    row = conn.execute(f"SELECT id FROM users WHERE name = %s{' FOR UPDATE' if lock else ''}", (user,)).fetchone()
    return None if row is None else int(row[0])


def _check_tables(conn: Conn) -> None:
    """Refuse to move a user when the schema holds a user table this code does not know: it would not be
    copied, and the clean step would leave it behind or the user would lose it."""
    rows = conn.execute(
        "SELECT DISTINCT table_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND column_name = 'user_id'"
    ).fetchall()
    unknown = sorted({str(r[0]) for r in rows} - set(USER_TABLES))
    if unknown:
        raise StoreError(f"cannot move users: this memlane does not know how to copy the user rows of {unknown}")


def _columns(conn: Conn, table: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
        (table,),
    ).fetchall()
    return [(str(n), str(t)) for n, t in rows]


def freeze(source: ShardStore, user: str, target: int) -> None:
    with source.transaction() as conn:
        _check_tables(conn)
        if _user_id(conn, user, lock=True) is None:
            raise NotFoundError(f"user {user!r} not found on shard {source.index}")
        conn.execute(
            "INSERT INTO shard_moves(name, state, shard, at) VALUES (%s, %s, %s, extract(epoch FROM now())) "
            "ON CONFLICT (name) DO UPDATE SET state = EXCLUDED.state, shard = EXCLUDED.shard, at = EXCLUDED.at",
            (user, MOVING, target),
        )
        conn.execute(
            "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, run_after = run_after + %s "
            "WHERE user_id = (SELECT id FROM users WHERE name = %s) AND status IN ('queued', 'running') "
            "AND run_after < %s",
            (FENCE_S, user, FENCE_S),
        )


def _delete_rows(conn: Conn, user_id: int) -> dict[str, int]:
    counts = {}
    for table in reversed(USER_TABLES):
        counts[table] = int(conn.execute(f"DELETE FROM {table} WHERE user_id = %s", (user_id,)).rowcount)
    conn.execute("DELETE FROM users WHERE id = %s", (user_id,))
    ann.drop_user(conn, user_id)  # the user's approximate index, if they had one here (derived data)
    return counts


def copy(source: ShardStore, target: ShardStore, user: str) -> dict[str, int]:
    """Copy the frozen user's rows to the target, in one transaction there; returns rows per table."""
    with source.transaction() as src:
        src_uid = _user_id(src, user)
        if src_uid is None:
            raise NotFoundError(f"user {user!r} not found on shard {source.index}")
        tables = {t: _columns(src, t) for t in ("users", *USER_TABLES)}
        data = {
            t: src.execute(
                f"SELECT {', '.join(f'{c}::text' for c, _ in cols)} FROM {t} WHERE "
                f"{'id' if t == 'users' else 'user_id'} = %s",
                (src_uid,),
            ).fetchall()
            for t, cols in tables.items()
        }
    rows: dict[str, int] = {}
    with target.transaction() as dst:
        _check_tables(dst)
        for t, cols in tables.items():
            if _columns(dst, t) != cols:
                raise StoreError(f"table {t} differs between shards {source.index} and {target.index}: same memlane?")
        old = _user_id(dst, user, lock=True)
        if old is not None:
            _delete_rows(dst, old)  # what an interrupted copy (committed, never switched to) left
        dst.execute("DELETE FROM shard_moves WHERE name = %s", (user,))  # a forward left by an earlier move away
        user_cols = [c for c in tables["users"] if c[0] != "id"]
        user_row = dict(zip([c for c, _ in tables["users"]], data["users"][0], strict=True))
        got = dst.execute(
            f"INSERT INTO users({', '.join(c for c, _ in user_cols)}) VALUES "
            f"({', '.join(f'%s::{t}' for _, t in user_cols)}) RETURNING id",
            [user_row[c] for c, _ in user_cols],
        ).fetchone()
        assert got is not None
        uid = int(got[0])
        remap: dict[str, dict[str, str]] = {}
        sequences = (
            ("blocks", "blocks_pk_seq", "pk"),
            ("search_keys", "search_keys_pk_seq", "pk"),
            ("jobs", "jobs_id_seq", "id"),
        )
        for t, seq, key in sequences:
            names = [c for c, _ in tables[t]]
            olds = [r[names.index(key)] for r in data[t]]
            remap[t] = {o: str(n) for o, n in zip(olds, next_ids(dst, seq, len(olds)), strict=True)}
        refs = {
            ("blocks", "pk"): "blocks",
            ("search_keys", "pk"): "search_keys",
            ("search_keys", "block_pk"): "blocks",
            ("key_vectors", "key_pk"): "search_keys",
            ("key_vectors", "block_pk"): "blocks",
            ("jobs", "id"): "jobs",
            ("jobs", "block_pk"): "blocks",
        }
        for t in USER_TABLES:
            cols = tables[t]
            out = []
            for r in data[t]:
                values = list(r)
                for i, (c, _) in enumerate(cols):
                    if c == "user_id":
                        values[i] = str(uid)
                    elif (t, c) in refs:
                        values[i] = remap[refs[(t, c)]][values[i]]
                    elif t == "jobs" and c == "run_after" and float(values[i]) >= FENCE_S:
                        values[i] = repr(float(values[i]) - FENCE_S)
                out.append(values)
            if out:
                with dst.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {t}({', '.join(c for c, _ in cols)}) VALUES "
                        f"({', '.join(f'%s::{ty}' for _, ty in cols)})",
                        out,
                    )
            rows[t] = len(out)
    return rows


def digests(shard: ShardStore, user: str) -> dict[str, str]:
    with shard.transaction() as conn:
        uid = _user_id(conn, user)
        if uid is None:
            return {}
        out = {}
        for t, statement in _DIGESTS.items():
            row = conn.execute(statement, {"uid": uid}).fetchone()
            count = conn.execute(
                f"SELECT count(*) FROM {t} WHERE {'id' if t == 'users' else 'user_id'} = %s", (uid,)
            ).fetchone()
            out[t] = f"{count[0] if count else 0}:{row[0] if row else None}"
        return out


def verify(source: ShardStore, target: ShardStore, user: str) -> None:
    a, b = digests(source, user), digests(target, user)
    differ = sorted(t for t in a if a.get(t) != b.get(t))
    if not a or differ:
        raise StoreError(
            f"the copy of user {user!r} on shard {target.index} differs from shard {source.index} in "
            f"{differ or 'every table'}; nothing was switched (rerun the move to copy again)"
        )


def switch(store: ShardedStore, user: str, target: int) -> None:
    home = store.shards[store.home(user)]
    with home.transaction() as conn:
        if target == home.index:
            conn.execute("DELETE FROM shard_map WHERE name = %s", (user,))
        else:
            conn.execute(
                "INSERT INTO shard_map(name, shard, moved_at) VALUES (%s, %s, extract(epoch FROM now())) "
                "ON CONFLICT (name) DO UPDATE SET shard = EXCLUDED.shard, moved_at = EXCLUDED.moved_at",
                (user, target),
            )
    store.forget_route(user)


def clean(source: ShardStore, user: str, target: int) -> dict[str, int]:
    """Delete the source copy, with the cached vectors of its texts that no other user there shares (as
    delete_user does: a moved user's vectors must not outlive their deletion on the target)."""
    with source.transaction() as conn:
        uid = _user_id(conn, user, lock=True)
        if uid is not None:
            conn.execute(
                "DELETE FROM embed_cache c USING (SELECT DISTINCT content_hash FROM search_keys WHERE user_id = %s) h "
                "WHERE c.hash = h.content_hash AND NOT EXISTS "
                "(SELECT 1 FROM search_keys k WHERE k.content_hash = h.content_hash AND k.user_id <> %s)",
                (uid, uid),
            )
        counts = {} if uid is None else _delete_rows(conn, uid)
        conn.execute(
            "UPDATE shard_moves SET state = %s, at = extract(epoch FROM now()) WHERE name = %s AND shard = %s",
            (MOVED, user, target),
        )
    return counts


def unfinished(store: ShardedStore, user: str) -> tuple[int, int] | None:
    """(source, target) of a move of ``user`` that froze the user and did not clean up yet."""
    for shard in store.shards:
        state = shard.move_state(user)
        if state is not None and state[0] == MOVING:
            return shard.index, state[1]
    return None


def move_user(
    store: ShardedStore,
    user: str,
    to: int,
    *,
    drain_s: float = DRAIN_S,
    after_step: Callable[[str], None] | None = None,
) -> MoveReport:
    """Move ``user`` to shard ``to`` (the steps in the module's docstring), or finish a move that was
    interrupted. Idempotent: a user already on ``to`` with no unfinished move is left as it is."""
    if not 0 <= to < store.count:
        raise ConfigError(f"no shard {to}: the store has shards 0 to {store.count - 1}")
    done: list[str] = []

    def step(name: str) -> None:
        done.append(name)
        if after_step is not None:
            after_step(name)

    pending = unfinished(store, user)
    current = store.shard_of(user, fresh=True)
    rows: dict[str, int] = {}
    if pending is None:
        if current == to:
            if not store.shards[to].has_user(user):
                raise NotFoundError(f"user {user!r} not found")
            return MoveReport(user, current, to, {}, ())
        source, target = current, to
        freeze(store.shards[source], user, target)
        step("freeze")
    else:
        source, target = pending
        if target != to:
            raise ConfigError(
                f"user {user!r} is in the middle of a move from shard {source} to shard {target}: "
                f"rerun with --to {target} to finish it first"
            )
    if current == source:
        rows = copy(store.shards[source], store.shards[target], user)
        step("copy")
        verify(store.shards[source], store.shards[target], user)
        step("verify")
        switch(store, user, target)
        step("switch")
    elif current != target:
        raise StoreError(f"user {user!r}: the map names shard {current}, a move is from {source} to {target}")
    time.sleep(drain_s)
    step("drain")
    clean(store.shards[source], user, target)
    step("clean")
    return MoveReport(user, source, target, rows, tuple(done))
