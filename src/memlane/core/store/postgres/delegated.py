"""A search's reads and an add's writes on Citus as functions the coordinator hands to the user's node whole.

Through a Citus coordinator every statement is planned there, sent to the worker holding the user and planned
again; inside a transaction it also opens and commits a transaction on that worker, one round trip each. A
search of a small user is about ten such statements, an add about fifteen (docs/scaling.md, "Where the time
goes"). These functions are distributed by their ``p_user_id`` argument and co-located with ``users``
(``create_distributed_function``): called alone, outside a transaction block, the coordinator sends the call
itself to the worker that holds that user's rows, which runs it in one local transaction and answers in one
round trip.

On that worker the function reads and writes the user's shards themselves, as Citus's own executor does
once it has routed a statement there: a statement on a distributed table inside the function would be
planned by Citus again (routed, deparsed, its ``INSERT ... SELECT`` staged through intermediate results),
which cost more than the statement itself (measured with pg_stat_statements: an add's function spent 10.7
ms, 2.5 of them in the shards' own statements). Before it touches a shard, the function does what Citus's
executor does before a write: it takes the shard's metadata lock in share mode (the lock a shard move or
split takes exclusively while it switches the shard over, ``lock_shard_metadata``), then finds the shard's
placement on this node. A shard that has moved away meanwhile (the coordinator routed the call just before
the switch) is not here: the function raises :data:`ELSEWHERE` having done nothing, and the store does the
same through the coordinator, statement by statement.

* :data:`GATHER` (``memlane_gather_*``): what :func:`memlane.core.store.candidates.gather.gather_stepwise` reads
  through the store's methods (both retrievers' candidates, their places, their sessions' word counts), for
  searches without filters, with the same statements (:mod:`memlane.core.store.candidates.postgres_search`'s)
  and the same answer;
* :data:`WRITE` (``memlane_write_*``): ``PostgresStore.write_blocks`` (the user's row locked or made, the
  deletion epoch checked, sessions made or refused as ended, exchange indexes continued, blocks, session
  words, jobs, keys, vectors and the user's counters) in one transaction on the user's node.

The statements are the store's own (``%(name)s`` placeholders, bare table names), turned into
``EXECUTE format(...) USING`` statements on the shards by :func:`on_shards`. A function's name ends with a
hash of its text, so a release that changes one installs its own beside the old one, which processes of the
release before go on calling. A store opened on Citus installs what is missing (:func:`install`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import SessionEndedError, StoreError
from memlane.core.jobs import EXTRACT_KIND
from memlane.core.model import MemoryBlock
from memlane.core.store.blocks.postgres_rows import (
    ADD_SESSION_LENGTHS,
    ADD_SESSION_TERMS,
    ENSURE_SESSIONS,
    session_starts,
    sides_json,
)
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.candidates.gather import Gather, Gathered
from memlane.core.store.candidates.keyword import query_terms
from memlane.core.store.candidates.postgres_search import BM25, GONE_SQL, SESSION_LENGTHS, SESSION_TFS, word_counts
from memlane.core.store.candidates.vectors import KIND_CODES
from memlane.core.store.postgres.adapt import PgVector
from memlane.core.store.postgres.ann import MAX_EF_SEARCH, SCAN_TUPLES, index_name
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.keys import BUMP_USER, INSERT_KEYS
from memlane.core.store.postgres.tenant import held_by
from memlane.core.store.users.deletions import deleted_in_flight
from memlane.core.store.users.postgres_rows import DELETED_SINCE
from memlane.core.timefmt import to_epoch

# Errors the functions raise, by SQLSTATE (class ML: memlane's own), turned back into memlane's errors.
COLLISION, DELETED, ENDED, GONE, ELSEWHERE = "ML001", "ML002", "ML003", "ML004", "ML005"

# The tables a function reads on this node: the user's shards, then the reference tables' copies here.
SHARDED = ("users", "blocks", "search_keys", "key_vectors", "jobs", "sessions", "session_terms", "session_lengths")
REFERENCED = ("deletion_epoch", "user_deletions")
_TABLES = SHARDED + REFERENCED
_TABLE = re.compile(
    r"\b(FROM|JOIN|INTO|UPDATE)\s+(" + "|".join(_TABLES) + r")\b"
    r"(\s+(?!(?:WHERE|SET|ON|JOIN|LEFT|USING|GROUP|ORDER|LIMIT|AS|FOR|RETURNING)\b)[a-z_]\w*)?"
)
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def on_shards(statement: str, *, into: str = "", extra: str = "") -> str:
    """A statement of the store's as a PL/pgSQL ``EXECUTE`` on this node's shards: each table it names
    (:data:`_TABLES`, after FROM, JOIN, INTO or UPDATE) becomes its shard, from the function's ``p_shards``
    (kept under the table's name where the statement gives it no alias of its own), and each ``%(name)s``
    placeholder the function's variable ``p_name``, passed as a parameter. ``into``: the INTO clause's
    variables; ``extra``: more arguments of ``format`` (``%11$s`` on)."""

    def table(m: re.Match[str]) -> str:
        alias = m.group(3) or f" AS {m.group(2)}"
        return f"{m.group(1)} %{_TABLES.index(m.group(2)) + 1}$s{alias}"

    names: list[str] = []

    def param(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    text = _PLACEHOLDER.sub(param, _TABLE.sub(table, statement))
    if "$sql$" in text or re.search(r"%[^%0-9]", text.replace("%%", "")):
        raise ValueError(f"cannot be run on the shards: {statement}")
    using = f" USING {', '.join('p_' + n for n in names)}" if names else ""
    return f"EXECUTE format($sql${text}$sql$, VARIADIC p_shards{extra}){' INTO ' + into if into else ''}{using}"


# Find the user's shards on this node (after locking them, for a write: ``__LOCK__``), or raise ELSEWHERE.
_SHARDS = f"""
    LOOP
        p_shard := get_shard_id_for_distribution_column('users', p_user_id);
        __LOCK__
        EXIT WHEN get_shard_id_for_distribution_column('users', p_user_id) = p_shard;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_placement p JOIN pg_dist_local_group g ON g.groupid = p.groupid
                   WHERE p.shardid = p_shard) THEN
        RAISE EXCEPTION 'the shard of user % is not on this node', p_user_id USING ERRCODE = '{ELSEWHERE}';
    END IF;
    p_shards := ARRAY(
        SELECT shard_name(t::regclass, get_shard_id_for_distribution_column(t::regclass, p_user_id))
        FROM unnest(ARRAY{list(SHARDED)}) t
    ) || ARRAY(
        SELECT shard_name(s.logicalrelid, s.shardid) FROM unnest(ARRAY{list(REFERENCED)}) WITH ORDINALITY AS t(name, i)
        JOIN pg_dist_shard s ON s.logicalrelid = t.name::regclass ORDER BY t.i
    );
"""
# What every function here says between its signature and its own variables: it runs in the store's schema
# (``__PATH__``), and declares the user's shard and shard table names that the lookup above fills.
_BODY_HEAD = """LANGUAGE plpgsql
SET search_path TO __PATH__
AS $fn$
DECLARE
    p_shard bigint;
    p_shards text[];
"""
# A write holds the shard's metadata lock in share mode (5) to its end, as Citus's executor does.
_READ_SHARDS = _SHARDS.replace("__LOCK__\n", "")
_WRITE_SHARDS = _SHARDS.replace("__LOCK__", "PERFORM lock_shard_metadata(5, ARRAY[p_shard]);")

# The exact vector scan of vector_top_blocks; every optional rule is written so that a rule not asked
# for (its parameter NULL, no block gone) folds away when the statement is planned with its values.
_VECTOR = """
SELECT v.block_pk, v.embedding <#> %(q)s AS d FROM key_vectors v
WHERE v.user_id = %(user_id)s::bigint AND (%(vkinds)s::smallint[] IS NULL OR v.kind = ANY(%(vkinds)s::smallint[]))
  AND (%(after)s::float8 IS NULL OR v.event_ts >= %(after)s) AND (%(before)s::float8 IS NULL OR v.event_ts < %(before)s)
  AND v.block_pk <> ALL(%(gone)s::bigint[])
ORDER BY d LIMIT %(want)s
"""
# The same through the user's HNSW index, whose expression casts the vector to the query's width (format's
# eleventh argument).
_VECTOR_ANN = _VECTOR.replace("v.embedding <#>", "v.embedding::vector(__DIMS__) <#>")
_BM25_RULES = (
    " AND (%(kinds)s::text[] IS NULL OR m.kind = ANY(%(kinds)s::text[]))"
    " AND (%(after)s::float8 IS NULL OR m.event_ts >= %(after)s)"
    " AND (%(before)s::float8 IS NULL OR m.event_ts < %(before)s) AND m.block_pk <> ALL(%(gone)s::bigint[])"
)
_POSITIONS = (
    "SELECT 2::smallint, b.pk, b.event_ts, b.session_id, NULL::text, b.exchange_index::bigint FROM blocks b "
    "WHERE b.user_id = %(user_id)s::bigint AND b.pk = ANY(%(refs)s::bigint[]) "
    "AND (b.expires_ts IS NULL OR b.expires_ts > %(now)s)"
)
_TFS = f"SELECT 3::smallint, NULL::bigint, NULL::float8, t.session_id, t.lexeme, t.tf::bigint FROM ({SESSION_TFS}) t"
_LENGTHS = (
    "SELECT 4::smallint, NULL::bigint, NULL::float8, l.session_id, NULL::text, l.words::bigint "
    f"FROM ({SESSION_LENGTHS}) l"
)
_VECTOR_ANN_ON_SHARDS = on_shards(_VECTOR_ANN, extra=" || vector_dims(p_q)::text").replace("__DIMS__", "%11$s")
_USER = "SELECT u.n_keys, (" + GONE_SQL + ") FROM users u WHERE u.id = %(user_id)s AND u.name = %(user)s"
# The best block of each key row in distance order, k of them (_best).
_BEST = """
                    p_rows := p_rows + 1;
                    IF NOT r.block_pk = ANY(p_vpks) THEN
                        p_vpks := p_vpks || r.block_pk;
                        p_vscores := p_vscores || -r.d;
                        EXIT WHEN cardinality(p_vpks) = p_k;
                    END IF;"""

GATHER = f"""
CREATE FUNCTION __NAME__(
    p_user_id bigint, p_user text, p_now double precision, p_k integer, p_q vector, p_vkinds smallint[],
    p_keyword boolean, p_kinds text[], p_after double precision, p_before double precision, p_text text,
    p_tsquery text, p_k1 double precision, p_b double precision, p_context boolean, p_words boolean,
    p_threshold bigint, p_ef integer)
RETURNS TABLE(o_part smallint, o_pk bigint, o_score double precision, o_session text, o_lexeme text, o_n bigint)
{_BODY_HEAD}    p_n_keys bigint;
    p_gone bigint[];
    p_want integer;
    p_rows integer;
    p_approx boolean := false;
    p_refs bigint[];
    p_seqscan text := current_setting('enable_seqscan');
    p_sort text := current_setting('enable_sort');
    p_vpks bigint[] := '{{}}';
    p_vscores double precision[] := '{{}}';
    p_kpks bigint[] := '{{}}';
    p_kscores double precision[] := '{{}}';
    r record;
BEGIN
{_READ_SHARDS}
    {on_shards(_USER, into="p_n_keys, p_gone")};
    IF p_n_keys IS NULL OR p_k <= 0 THEN
        RETURN;
    END IF;
    p_gone := coalesce(p_gone, '{{}}');
    IF p_q IS NOT NULL THEN
        -- AnnSettings.applies; the index is on this shard of key_vectors (citus.ann_index)
        IF p_threshold IS NOT NULL AND p_n_keys >= greatest(p_threshold, 1) THEN
            p_approx := coalesce((SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(
                '{index_name(0).removesuffix("0")}' || p_user_id || '_'
                || get_shard_id_for_distribution_column('key_vectors', p_user_id))), false);
            IF NOT p_approx THEN  -- searched exactly meanwhile; the caller starts a build
                RETURN QUERY SELECT 5::smallint, p_user_id, NULL::float8, NULL::text, NULL::text, NULL::bigint;
            END IF;
        END IF;
        PERFORM set_config('enable_seqscan', 'off', true);
        p_want := greatest(4 * p_k, p_k + 32);
        LOOP
            p_vpks := '{{}}';
            p_vscores := '{{}}';
            p_rows := 0;
            IF p_approx THEN
                PERFORM set_config('hnsw.ef_search', least({MAX_EF_SEARCH}, greatest(p_ef, p_want))::text, true),
                    set_config('hnsw.iterative_scan', 'strict_order', true), set_config('enable_sort', 'off', true),
                    set_config('hnsw.max_scan_tuples', '{SCAN_TUPLES}', true);
                FOR r IN {_VECTOR_ANN_ON_SHARDS} LOOP{_BEST}
                END LOOP;
            ELSE
                FOR r IN {on_shards(_VECTOR)} LOOP{_BEST}
                END LOOP;
            END IF;
            EXIT WHEN cardinality(p_vpks) = p_k OR p_rows < p_want;
            p_want := p_want * 4;
        END LOOP;
        PERFORM set_config('enable_seqscan', p_seqscan, true), set_config('enable_sort', p_sort, true);
        RETURN QUERY SELECT 0::smallint, x.pk, x.score, NULL::text, NULL::text, x.i
            FROM unnest(p_vpks, p_vscores) WITH ORDINALITY AS x(pk, score, i);
    END IF;
    IF p_keyword AND p_text IS NOT NULL THEN
        FOR r IN {on_shards(BM25.replace("{filters}", _BM25_RULES))} LOOP
            p_kpks := p_kpks || r.block_pk;
            p_kscores := p_kscores || r.best;
        END LOOP;
        RETURN QUERY SELECT 1::smallint, x.pk, x.score, NULL::text, NULL::text, x.i
            FROM unnest(p_kpks, p_kscores) WITH ORDINALITY AS x(pk, score, i);
    END IF;
    IF NOT p_context THEN
        RETURN;
    END IF;
    p_refs := p_vpks || p_kpks;
    RETURN QUERY {on_shards(_POSITIONS)};
    IF NOT FOUND OR NOT p_words OR p_text IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY {on_shards(_TFS)};
    IF FOUND THEN
        RETURN QUERY {on_shards(_LENGTHS)};
    END IF;
END
$fn$
"""
_GATHER_ARGS = (
    "bigint, text, double precision, integer, vector, smallint[], boolean, text[], double precision, "
    "double precision, text, text, double precision, double precision, boolean, boolean, bigint, integer"
)

# The user's row locked (PostgresBase._lock_user), made if missing; another name's row is refused.
_LOCK = "SELECT 1 FROM users WHERE id = %(user_id)s AND name = %(user)s FOR NO KEY UPDATE"
_MAKE_USER = (
    "INSERT INTO users(id, name, created_at) VALUES (%(user_id)s, %(user)s, %(now)s) ON CONFLICT (id) DO NOTHING"
)
_HOLDER = "SELECT name FROM users WHERE id = %(user_id)s"
_ENDED = (
    "SELECT session_id FROM sessions WHERE user_id = %(user_id)s AND session_id = ANY(%(sessions)s::text[]) "
    "AND ended_at IS NOT NULL LIMIT 1"
)
# The blocks: exchange indexes continued from their session's last (rows.continue_sessions), expiry from the
# block's TTL, else its session's, else the default (sessions.expiry).
_BLOCKS = """
INSERT INTO blocks (user_id, pk, id, conversation_id, session_id, exchange_index, perspective, mode, message,
    summary, contexts, message_ids, event_ts, ingest_ts, time_annotation, extraction_status, extraction_prompt,
    content_hash, annotations, kind, sides, ttl_s, expires_ts, updated_ts, prompt_id, prompt_version,
    fail_count, last_queued_ts)
SELECT %(user_id)s, x.pk, x.id, x.conversation_id, x.session_id, x.exchange_index + coalesce(
        (SELECT max(e.exchange_index) + 1 FROM blocks e WHERE e.user_id = %(user_id)s
         AND e.conversation_id = x.conversation_id AND e.session_id = x.session_id), 0),
    x.perspective, x.mode, x.message, x.summary, x.contexts, x.message_ids, x.event_ts, x.ingest_ts,
    x.time_annotation, x.extraction_status, x.extraction_prompt, x.content_hash, x.annotations, x.kind, x.sides,
    x.ttl_s, CASE WHEN coalesce(x.ttl_s, s.default_ttl_s, %(default_ttl)s) = 0 THEN NULL
        ELSE x.ingest_ts + coalesce(x.ttl_s, s.default_ttl_s, %(default_ttl)s) END,
    x.updated_ts, x.prompt_id, x.prompt_version, x.fail_count, coalesce(%(queued)s, x.last_queued_ts)
FROM jsonb_populate_recordset(NULL::blocks, %(blocks)s) x
LEFT JOIN sessions s ON s.user_id = %(user_id)s AND s.session_id = x.session_id
"""
_JOBS = (
    "INSERT INTO jobs(user_id, id, kind, block_pk, status, run_after, max_attempts, created_at, updated_at) "
    "SELECT %(user_id)s, j, %(kind)s, b, 'queued', %(queued)s, %(attempts)s, %(queued)s, %(queued)s "
    "FROM unnest(%(job_ids)s::bigint[], %(pks)s::bigint[]) AS x(j, b)"
)
_VECTORS = (
    "INSERT INTO key_vectors (user_id, key_pk, block_pk, kind, event_ts, embedding) "
    "SELECT %(user_id)s, x.k, x.b, x.c, x.t, x.e "
    "FROM unnest(%(key_pks)s::bigint[], %(block_pks)s::bigint[], %(kind_codes)s::smallint[], "
    "%(times)s::float8[], %(vectors)s::vector[]) AS x(k, b, c, t, e)"
)

WRITE = f"""
CREATE FUNCTION __NAME__(
    p_user_id bigint, p_user text, p_since bigint, p_name_sha256 text, p_now double precision,
    p_queued double precision, p_attempts integer, p_kind text, p_default_ttl bigint, p_blocks jsonb,
    p_pks bigint[], p_sessions text[], p_conversations text[], p_starts double precision[], p_job_ids bigint[],
    p_key_pks bigint[], p_block_pks bigint[], p_key_kinds text[], p_kind_codes smallint[], p_texts text[],
    p_hashes text[], p_times double precision[], p_vectors vector[])
RETURNS void
{_BODY_HEAD}    p_found integer;
    p_holder text;
    p_locked boolean := false;
    p_tombstone bigint;
    p_pruned bigint;
    p_ended text;
    p_keys bigint;
    p_tokens bigint;
BEGIN
{_WRITE_SHARDS}
    FOR attempt IN 1..5 LOOP
        {on_shards(_LOCK, into="p_found")};
        IF p_found IS NOT NULL THEN
            p_locked := true;
            EXIT;
        END IF;
        {on_shards(_MAKE_USER)};
        GET DIAGNOSTICS p_found = ROW_COUNT;
        IF p_found = 0 THEN
            {on_shards(_HOLDER, into="p_holder")};
            IF p_holder IS NOT NULL AND p_holder <> p_user THEN
                RAISE EXCEPTION '%', p_holder USING ERRCODE = '{COLLISION}';
            END IF;
        END IF;
        p_found := NULL;
    END LOOP;
    IF NOT p_locked THEN
        RAISE EXCEPTION 'deleted while written to' USING ERRCODE = '{GONE}';
    END IF;
    -- check_not_deleted (deletions.check_write), after the lock: it sees a deletion it waited for
    IF p_since IS NOT NULL THEN
        {on_shards(DELETED_SINCE, into="p_tombstone, p_pruned")};
        IF (p_tombstone IS NOT NULL AND p_tombstone > p_since) OR p_since < p_pruned THEN
            RAISE EXCEPTION 'deleted' USING ERRCODE = '{DELETED}';
        END IF;
    END IF;
    -- sessions.ensure_sessions
    {on_shards(ENSURE_SESSIONS)};
    {on_shards(_ENDED, into="p_ended")};
    IF p_ended IS NOT NULL THEN
        RAISE EXCEPTION '%', p_ended USING ERRCODE = '{ENDED}';
    END IF;
    {on_shards(_BLOCKS)};
    {on_shards(ADD_SESSION_TERMS)};
    {on_shards(ADD_SESSION_LENGTHS)};
    IF p_attempts > 0 THEN
        {on_shards(_JOBS)};
    END IF;
    {on_shards(INSERT_KEYS, into="p_keys, p_tokens")};
    {on_shards(_VECTORS)};
    {on_shards(BUMP_USER)};
END
$fn$
"""
_WRITE_ARGS = (
    "bigint, text, bigint, text, double precision, double precision, integer, text, bigint, jsonb, bigint[], "
    "text[], text[], double precision[], bigint[], bigint[], bigint[], text[], smallint[], text[], text[], "
    "double precision[], vector[]"
)


@dataclass(frozen=True)
class Routine:
    """One function: its definition (``__NAME__`` and ``__PATH__`` to fill) and argument types."""

    stem: str
    definition: str
    args: str

    @property
    def name(self) -> str:
        digest = hashlib.sha256((self.definition + self.args).encode()).hexdigest()[:10]
        return f"{self.stem}_{digest}"


GATHER_ROUTINE = Routine("memlane_gather", GATHER, _GATHER_ARGS)
WRITE_ROUTINE = Routine("memlane_write", WRITE, _WRITE_ARGS)
ROUTINES = (GATHER_ROUTINE, WRITE_ROUTINE)


def install(conn: Conn) -> list[str]:
    """Create this release's functions in the store's schema where they are missing, distributed by user
    with ``users``; the names of those made. Inside the caller's transaction (the migrations' lock held)."""
    row = conn.execute(
        "SELECT c.relnamespace::regnamespace::text, "
        "(SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector') "
        "FROM pg_class c WHERE c.oid = 'users'::regclass"
    ).fetchone()
    assert row is not None
    schema, vector_schema = str(row[0]), str(row[1])
    path = schema if vector_schema == schema else f"{schema}, {vector_schema}"
    made = []
    for routine in ROUTINES:
        signature = f"{schema}.{routine.name}({routine.args})"
        exists = conn.execute("SELECT to_regprocedure(%s) IS NOT NULL", (signature,)).fetchone()
        if exists and exists[0]:
            continue
        definition = routine.definition.replace("__NAME__", f"{schema}.{routine.name}").replace("__PATH__", path)
        conn.execute(definition.encode())
        conn.execute(
            "SELECT create_distributed_function(%s, 'p_user_id', colocate_with => %s)", (signature, f"{schema}.users")
        )
        made.append(routine.name)
    return made


class Elsewhere(Exception):
    """The user's shard was not on the node the call reached (it moved meanwhile): nothing was done."""


def gather(conn: Conn, user: str, user_id: int, ask: Gather, ann: AnnSettings, now: float) -> tuple[Gathered, bool]:
    """``ask`` (without filters) read on the user's node in one call; and whether the user is past the
    threshold with no usable index yet (the caller starts a build). ``conn`` is in autocommit mode: the
    call must be a statement of its own for the coordinator to hand it on. Elsewhere if the shard moved."""
    terms = query_terms(ask.query)
    scope = ask.scope
    vkinds = None
    if scope.kinds is not None and len(scope.kinds) < len(KIND_CODES):
        vkinds = sorted(KIND_CODES[x] for x in scope.kinds)
    params = (
        user_id, user, now, ask.k, None if ask.vector is None else PgVector(ask.vector.reshape(-1)), vkinds,
        ask.keyword, None if scope.kinds is None else sorted(scope.kinds), scope.after, scope.before,
        " ".join(terms) if terms else None, " | ".join(f"'{t}'" for t in terms) if terms else None,
        ask.k1, ask.b, ask.context, ask.words, ann.threshold, ann.ef_search,
    )  # fmt: skip
    try:
        rows = conn.execute(
            sql.SQL(
                "SELECT * FROM {}(%s::bigint, %s::text, %s::float8, %s::integer, %s::vector, %s::smallint[], "
                "%s::boolean, %s::text[], %s::float8, %s::float8, %s::text, %s::text, %s::float8, %s::float8, "
                "%s::boolean, %s::boolean, %s::bigint, %s::integer)"
            ).format(sql.Identifier(GATHER_ROUTINE.name)),
            params,
        ).fetchall()
    except psycopg.Error as exc:
        if exc.sqlstate == ELSEWHERE:
            raise Elsewhere(str(exc)) from exc
        raise
    parts: dict[int, list[tuple[int | None, float | None, str | None, str | None, int | None]]] = {}
    for part, pk, score, session, lexeme, n in rows:
        parts.setdefault(int(part), []).append((pk, score, session, lexeme, n))
    rankings: dict[str, list[tuple[int, float]]] = {}
    for part, name, asked in ((0, "vector", ask.vector is not None), (1, "keyword", ask.keyword)):
        if asked:
            ranked = sorted(parts.get(part, []), key=lambda r: int(r[4] or 0))
            rankings[name] = [(int(pk or 0), float(score or 0.0)) for pk, score, _, _, _ in ranked]
    positions = {
        int(pk or 0): (str(session), int(n or 0), float(score or 0.0)) for pk, score, session, _, n in parts.get(2, [])
    }
    counts = None
    if 3 in parts:
        tfs = [(session, lexeme, n) for _, _, session, lexeme, n in parts[3]]
        lengths = [(session, n) for _, _, session, _, n in parts.get(4, [])]
        counts = word_counts(tfs, lengths, sorted({p[0] for p in positions.values()}))
    return Gathered(rankings, positions, counts), 5 in parts


def allocate(conn: Conn, blocks: int, keys: int, jobs: int) -> tuple[list[int], list[int], list[int], float]:
    """Ids for a write (blocks, keys, jobs) from the coordinator's sequences, as on one server, and the
    coordinator's clock (when jobs are queued: every process compares the queue's times on it), in one
    statement on the coordinator."""
    row = conn.execute(
        "SELECT ARRAY(SELECT nextval('blocks_pk_seq') FROM generate_series(1, %(b)s)), "
        "ARRAY(SELECT nextval('search_keys_pk_seq') FROM generate_series(1, %(k)s)), "
        "ARRAY(SELECT nextval('jobs_id_seq') FROM generate_series(1, %(j)s)), extract(epoch FROM now())",
        {"b": blocks, "k": keys, "j": jobs},
    ).fetchone()
    assert row is not None
    return sorted(row[0]), sorted(row[1]), sorted(row[2]), float(row[3])


def write(
    conn: Conn,
    user: str,
    user_id: int,
    blocks: Sequence[MemoryBlock],
    vectors: Vectors,
    *,
    since: int | None,
    name_sha256: str,
    now: float,
    attempts: int,
    default_ttl_s: int,
) -> list[int]:
    """``PostgresStore.write_blocks`` in one call on the user's node; the jobs' ids. ``conn`` is in
    autocommit mode (see :func:`gather`). Elsewhere, having written nothing, if the shard moved."""
    pks, key_pks, job_ids, queued = allocate(conn, len(blocks), len(blocks), len(blocks) if attempts else 0)
    sessions, conversations, starts = session_starts(blocks)
    rows = [
        {
            "pk": pk, "id": b.id, "conversation_id": b.conversation_id, "session_id": b.session_id,
            "exchange_index": b.exchange_index, "perspective": b.perspective, "mode": b.mode.value,
            "message": b.message, "summary": b.summary, "contexts": list(b.contexts),
            "message_ids": list(b.message_ids), "event_ts": to_epoch(b.event_time),
            "ingest_ts": to_epoch(b.ingest_time), "time_annotation": b.time_annotation,
            "extraction_status": b.extraction_status.value, "extraction_prompt": b.extraction_prompt,
            "content_hash": b.content_hash, "annotations": b.annotations, "kind": b.kind.value,
            "sides": json.loads(sides_json(b)), "ttl_s": b.ttl_s,
            "updated_ts": None if b.updated_at is None else to_epoch(b.updated_at), "prompt_id": b.prompt_id,
            "prompt_version": b.prompt_version, "fail_count": b.fail_count,
            "last_queued_ts": None if b.last_queued_at is None else to_epoch(b.last_queued_at),
        }
        for pk, b in zip(pks, blocks, strict=True)
    ]  # fmt: skip
    params = (
        user_id, user, since, name_sha256, now, queued if attempts else None, attempts, EXTRACT_KIND,
        default_ttl_s, json.dumps(rows), pks, sessions, conversations, starts, job_ids, key_pks, pks,
        ["message"] * len(blocks), [KIND_CODES["message"]] * len(blocks), [b.message for b in blocks],
        [b.content_hash for b in blocks], [to_epoch(b.event_time) for b in blocks],
        [PgVector(np.asarray(v, dtype=np.float32)) for v in vectors],
    )  # fmt: skip
    try:
        conn.execute(
            sql.SQL(
                "SELECT {}(%s::bigint, %s::text, %s::bigint, %s::text, %s::float8, %s::float8, %s::integer, %s::text, "
                "%s::bigint, %s::jsonb, %s::bigint[], %s::text[], %s::text[], %s::float8[], %s::bigint[], "
                "%s::bigint[], %s::bigint[], %s::text[], %s::smallint[], %s::text[], %s::text[], %s::float8[], "
                "%b::vector[])"
            ).format(sql.Identifier(WRITE_ROUTINE.name)),
            params,
        )
    except psycopg.Error as exc:
        raise _memlane_error(exc, user, user_id) from exc
    return job_ids


def _memlane_error(exc: psycopg.Error, user: str, user_id: int) -> Exception:
    """The memlane error a function's own SQLSTATE stands for (its message holds what it names); other
    errors as they are."""
    detail = exc.diag.message_primary or ""
    if exc.sqlstate == COLLISION:
        return held_by(user, user_id, detail)
    if exc.sqlstate == DELETED:
        return deleted_in_flight(user)
    if exc.sqlstate == ENDED:
        return SessionEndedError(user, detail)
    if exc.sqlstate == GONE:
        return StoreError(f"user {user!r} keeps being deleted while written to")
    if exc.sqlstate == ELSEWHERE:
        return Elsewhere(str(exc))
    return exc
