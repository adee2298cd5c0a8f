"""Both retrievers as SQL, inside one user's namespace.

Vectors: an exact scan of the user's rows of the narrow ``key_vectors`` table (found through its
``(user_id, key_pk)`` primary key), ordered by inner product (the vectors are L2-normalised, so this is the
cosine similarity the SQLite store computes, without pgvector's norm computations). No global ANN index:
the storage research measured a global HNSW index with a per-user filter returning almost nothing.

Keywords: the ``tsvector`` GIN index finds the user's matching keys; BM25 is then computed in SQL with
the formula of :mod:`memlane.core.ranking.bm25` (FTS5's idf; k1 and b come from the search settings,
FTS5's 1.2 and 0.75 by default), written there as SQL too, because core
PostgreSQL's ``ts_rank`` has no IDF. Term frequencies come from the matched tsvectors' positions; document
frequencies are counted over the user's matching keys (every key holding a query term matches, so the
count is exact); N and the average length are per-user counters kept by every write. Statistics are per
user (FTS5's are per file): a user's ranking never depends on other users' text.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import (
    Filters,
)
from memlane.core.ranking.bm25 import BM25_B, BM25_K1, sql_idf, sql_term_score
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.blocks.postgres_rows import LIVE, filter_sql, now_epoch, restricts
from memlane.core.store.candidates.annsettings import EXACT, AnnSettings
from memlane.core.store.candidates.keyword import query_terms
from memlane.core.store.candidates.scope import EVERY_BLOCK, Scope
from memlane.core.store.candidates.vectors import KIND_CODES
from memlane.core.store.postgres.adapt import PgVector
from memlane.core.store.postgres.ann import index_name, search_config, set_search
from memlane.core.store.postgres.dialect import Conn
from memlane.core.store.postgres.schema import TEXT_CONFIG
from memlane.core.store.postgres.tenant import user_key


def _user_id(conn: Conn, user: str, *, index_only: bool = False) -> int | None:
    """The user's id, looked up first so the search is planned for this user, not an average one.

    ``index_only`` also turns sequential scans off for the rest of the transaction (in the same round
    trip): a per-user scan belongs on the ``(user_id, ...)`` key, but with statistics gone stale (right
    after a bulk load, measured) the planner chose a parallel scan of every user's vectors, 33-55 ms for a
    10k user instead of 5-6."""
    setting = ", set_config('enable_seqscan', 'off', true)" if index_only else ""
    row = conn.execute(f"SELECT id{setting} FROM users WHERE id = %s AND name = %s", (user_key(user), user)).fetchone()
    return None if row is None else int(row[0])


def _window(column: str, after: float | None, before: float | None, params: dict[str, object]) -> str:
    sql = ""
    if after is not None:
        sql += f" AND {column} >= %(after)s"
        params["after"] = after
    if before is not None:
        sql += f" AND {column} < %(before)s"
        params["before"] = before
    return sql


def vector_top_blocks(
    conn: Conn,
    user: str,
    query: Vectors,
    k: int,
    scope: Scope = EVERY_BLOCK,
    *,
    ann: AnnSettings = EXACT,
    build_index: Callable[[int], None] = lambda _user_id: None,
) -> list[tuple[int, float]]:
    """Top-k blocks of ``scope`` by cosine similarity; a block scores as its best key. Exact, or for a user of at least
    ``ann.threshold`` keys through the user's HNSW index (:mod:`memlane.core.store.postgres.ann`) once it
    is made; ``build_index`` is called with the user's id when the user has none yet.

    Blocks expired at ``now`` are never candidates: without filters, the user's expired blocks not swept
    yet (an index probe of ``blocks_user_expiry``, empty for a user without TTLs) are left out by
    reference; with filters (:attr:`Filters.pre`), the pool is the live blocks that pass them. A pool of at
    most :func:`exact_pool` blocks is scored exactly, key by key; a wider one filters the user's scan by a
    semi-join on the block, read until k blocks pass (:func:`_walk`): for a user searched exactly, the
    user's nearest keys first, then the whole exact scan if they hold fewer than k of the pool's blocks;
    past the ANN threshold, the HNSW index's iterative scan within :func:`walk_budget` keys, and if it
    comes up short, the pool scored exactly instead."""
    kinds, filters = scope.kinds, scope.filters
    now = now_epoch(scope.now)
    filtered = restricts(filters)
    # A filtered search leaves expired blocks out of its pool instead of by reference (no GONE_SQL), and its
    # pool is read with index reads costed as the cached reads they are (_POOL_PAGE_COST).
    # Whether the user's index is ready, read from the catalog only where a user can have one (a catalog is a
    # local table, which a distributed store cannot join with its users).
    index_ready = (
        "NULL"
        if ann.threshold is None
        else "(SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%(prefix)s || id))"
    )
    key = user_key(user)
    row = conn.execute(
        f"SELECT id, n_keys, set_config('enable_seqscan', 'off', true), {index_ready}, "
        + (f"set_config('random_page_cost', '{_POOL_PAGE_COST}', true)" if filtered else f"({GONE_SQL})")
        + " FROM users WHERE id = %(user_id)s AND name = %(user)s",
        {"prefix": index_name(0).removesuffix("0"), "user_id": key, "now": now, "user": user},
    ).fetchone()
    if k <= 0 or row is None:
        return []
    user_id, n_keys, valid = int(row[0]), int(row[1]), row[3]
    gone = [] if filtered else list(row[4] or [])
    approximate = ann.applies(n_keys)
    if approximate and not valid:
        build_index(user_id)
    approximate = approximate and bool(valid)
    params: dict[str, object] = {"user_id": user_id, "q": PgVector(query.reshape(-1)), "now": now}
    where = "v.user_id = %(user_id)s::bigint"  # psycopg would send a small id as int2
    if kinds is not None and len(kinds) < len(KIND_CODES):
        where += " AND v.kind = ANY(%(kinds)s::smallint[])"
        params["kinds"] = sorted(KIND_CODES[x] for x in kinds)
    where += _window("v.event_ts", scope.after, scope.before, params)
    # A block may own several keys: take enough keys to find k distinct blocks, widening if needed.
    want = max(4 * k, k + 32)
    if filtered:
        assert filters is not None
        return _filtered(conn, filters, params, where, k, want, n_keys, ann if approximate else None, int(query.size))
    if gone:
        where += " AND v.block_pk <> ALL(%(gone)s::bigint[])"
        params["gone"] = gone
    statement = f"SELECT v.block_pk, {_distance(approximate, query.size)} AS d FROM key_vectors v WHERE {where} "
    statement += "ORDER BY d LIMIT %(n)s"
    while True:
        params["n"] = want
        if approximate:
            set_search(conn, ann, want)
        rows = conn.execute(statement, params).fetchall()
        best = _best(rows, k)
        if len(best) == k or len(rows) < want:
            return list(best.items())
        want *= 4


def _distance(approximate: bool, dims: int) -> str:
    """The key's distance to the query. The user's index is on the vector cast to its width
    (memlane.core.store.postgres.ann): the same expression lets the planner use it."""
    return f"v.embedding::vector({int(dims)}) <#> %(q)s" if approximate else "v.embedding <#> %(q)s"


def _filtered(
    conn: Conn,
    filters: Filters,
    params: dict[str, object],
    where: str,
    k: int,
    want: int,
    n_keys: int,
    ann: AnnSettings | None,
    dims: int,
) -> list[tuple[int, float]]:
    """The top-k blocks among the live blocks that pass ``filters`` (``ann``: the user's index is used).
    The pool's first rows decide the path (past the threshold, the same statement sets the index scan up)."""
    rules = filter_sql(filters.pre, params)
    cap = exact_pool(n_keys, ann is not None, k)
    setup = None if ann is None else search_config(ann, want, walk_budget(n_keys, cap, want))
    pool = _pool(conn, rules, params, cap, setup)
    if pool is not None:  # at most cap blocks: their keys one by one
        return _exact_pool(conn, pool, where, params, k)
    # A wider pool: the user's scan (exact, or the index's within a budget), keeping the pool's keys
    kept = (
        f"EXISTS (SELECT 1 FROM blocks b WHERE b.user_id = %(user_id)s::bigint AND b.pk = v.block_pk AND {LIVE}{rules})"
    )
    if ann is not None:
        walk = f"SELECT v.block_pk, {_distance(True, dims)} AS d FROM key_vectors v WHERE {where} AND {kept} ORDER BY d"
        found = _walk(conn, walk, params, k)
        if found is not None:
            return found
        # the iterative scan gave up (its budget spent) before k blocks: score the pool exactly
        return _exact_pool(conn, _pool(conn, rules, params, None) or [], where, params, k)
    # Searched exactly: the user's nearest NEAR_KEYS * want keys, then the pool's among them in order (a
    # few probes of the block's key); the semi-join over the whole scan only if those hold fewer than k
    # of the pool's blocks. The whole scan's semi-join read the whole pool (5,000 blocks of a filter keeping
    # 50% of 10k, 2 ms, measured).
    near = (
        f"SELECT v.block_pk, v.d FROM (SELECT v.block_pk, v.embedding <#> %(q)s AS d FROM key_vectors v WHERE {where} "
        f"ORDER BY d LIMIT {int(NEAR_KEYS * want)}) v WHERE {kept} ORDER BY v.d"
    )
    found = _walk(conn, near, params, k)
    if found is not None:
        return found
    statement = f"SELECT v.block_pk, v.embedding <#> %(q)s AS d FROM key_vectors v WHERE {where} AND {kept} ORDER BY d"
    while True:
        rows = conn.execute(f"{statement} LIMIT %(n)s", {**params, "n": want}).fetchall()
        best = _best(rows, k)
        if len(best) == k or len(rows) < want:
            return list(best.items())
        want *= 4


# How many of the user's nearest keys (per key asked) a wide filter of a user searched exactly looks among: a
# pool wider than a sixteenth of the user's keys holds about half as many keys as asked among them.
NEAR_KEYS = 8


_WALKS = itertools.count()


# random_page_cost of a filtered search's transaction. With the default 4 (a disk's random read), the
# planner read the first 503 blocks of a filter keeping 50% through the bitmap of the annotation index's
# every match (of every user; 0.83 ms at 20k blocks) instead of the user's primary key (0.50 ms, measured):
# a search's rows are read from memory, where a random read costs about what a sequential one does.
_POOL_PAGE_COST = "1.1"


def _walk(conn: Conn, statement: str, params: dict[str, object], k: int) -> list[tuple[int, float]] | None:
    """The first k distinct blocks of the key rows of ``statement`` (block, distance; in distance order),
    reading only as far as they need: the user's filtered index scan, under a LIMIT of the keys a search
    asks for (4 k + 32), walked ten times that many keys for a filter keeping 10% of the blocks and took
    2.3 times the unfiltered search (measured at 20k keys). First k rows (k blocks unless some own several
    of them); if that is not k blocks, a cursor reads the rows again from the start, a batch at a time (a
    cursor costs ~0.2 ms more than one statement, measured, so it is not the first try; the transaction's
    end closes it). None if the rows end first (an index scan's budget, ``hnsw.max_scan_tuples``, spent)."""
    rows = conn.execute(f"{statement} LIMIT {int(k)}", params).fetchall()
    best = _best(rows, k)
    if len(best) == k:
        return list(best.items())
    if len(rows) < k:
        return None
    name = f"memlane_walk_{next(_WALKS)}"
    conn.execute(f"DECLARE {name} NO SCROLL CURSOR FOR {statement}", params)
    best, batch = {}, 2 * k
    while True:
        rows = conn.execute(f"FETCH {batch} FROM {name}").fetchall()
        for pk, d in rows:
            best.setdefault(int(pk), -float(d))  # <#> is the negative inner product
            if len(best) == k:
                return list(best.items())
        if len(rows) < batch:
            return None
        batch *= 2


# The user's blocks expired at ``now`` and not swept yet: what an unfiltered search leaves out (from the
# partial index blocks_user_expiry, which a user without TTLs has no entry in).
GONE_SQL = "SELECT array_agg(b.pk) FROM blocks b WHERE b.user_id = %(user_id)s AND b.expires_ts <= %(now)s"


def exact_pool(n_keys: int, approximate: bool, k: int) -> int:
    """The most blocks a filtered vector search scores exactly, key by key (~5-7 us a key, measured).
    Searched exactly, a sixteenth of the user's keys: a wider pool filters the exact scan (~1 us a key).
    Past the ANN threshold, where a wider pool filters the index's walk instead, whose cost grows as the
    pool narrows (about k / share of the keys are walked, at about the same cost a key as the exact scoring),
    the two meet at about sqrt(k n) blocks: sqrt(EXACT_POOL_FACTOR k n_keys) (measured at 20k keys and k =
    10: exact scoring and the walk both ~2.5 ms at 500-600 blocks, 2.5-3% of the user)."""
    if not approximate:
        return n_keys // 16
    return math.isqrt(int(EXACT_POOL_FACTOR * max(k, 1) * n_keys))


EXACT_POOL_FACTOR = 1.25


# How far a filtered walk of the HNSW index goes before the filtered pool is scored exactly instead:
# SCAN_BUDGET times the keys a filter keeping just more than the exact pool's bound needs for the keys a
# search asks for (the walk is taken only for wider filters, so it gives up only where the graph fails it).
SCAN_BUDGET = 4


def walk_budget(n_keys: int, cap: int, want: int) -> int:
    """``hnsw.max_scan_tuples`` of a filtered walk (:data:`SCAN_BUDGET`) for a user of ``n_keys`` keys whose
    exact pools hold at most ``cap`` blocks, asking ``want`` keys."""
    return max(1, SCAN_BUDGET * want * max(n_keys, 1) // max(cap, 1))


def _pool(
    conn: Conn, rules: str, params: dict[str, object], cap: int | None, setup: str | None = None
) -> list[int] | None:
    """The live blocks of the user that pass the filter ``rules``, or None if there are more than ``cap`` (the
    first ``cap + 1`` read; None: no bound); ``setup``: settings (``set_config`` calls) made in the same
    round trip. A wide pool's blocks stay on the server (parsing 500 ids cost ~0.1 ms)."""
    select = f"SELECT b.pk FROM blocks b WHERE b.user_id = %(user_id)s::bigint AND {LIVE}{rules}"
    pks = "coalesce(array_agg(p.pk), '{}')"
    if cap is not None:
        select += f" LIMIT {int(cap) + 1}"
        pks = f"CASE WHEN count(*) <= {int(cap)} THEN {pks} END"
    row = conn.execute(f"SELECT {pks}{'' if setup is None else ', ' + setup} FROM ({select}) p", params).fetchone()
    return None if row is None or row[0] is None else [int(pk) for pk in row[0]]


def _exact_pool(conn: Conn, pool: list[int], where: str, params: dict[str, object], k: int) -> list[tuple[int, float]]:
    """Exact top-k of the blocks ``pool``: every key of theirs (through the keys' block index) scored, and
    sorted here: past the ANN threshold sorts may be off in the transaction (:func:`search_config`), and a
    sort's disabled cost planned the statement with JIT compilation (100 ms, measured)."""
    if not pool:
        return []
    rows = conn.execute(
        "SELECT v.block_pk, v.embedding <#> %(q)s AS d FROM search_keys k "
        "JOIN key_vectors v ON v.user_id = k.user_id AND v.key_pk = k.pk "
        f"WHERE k.user_id = %(user_id)s::bigint AND k.block_pk = ANY(%(pool)s::bigint[]) AND {where}",
        {**params, "pool": pool},
    ).fetchall()
    return list(_best(sorted(rows, key=lambda row: float(row[1])), k).items())


def _best(rows: Sequence[tuple[Any, ...]], k: int) -> dict[int, float]:
    """The first ``k`` distinct blocks of key rows (block pk, negative inner product) in distance order."""
    best: dict[int, float] = {}
    for pk, d in rows:
        if int(pk) not in best:
            best[int(pk)] = -float(d)  # <#> is the negative inner product
            if len(best) == k:
                break
    return best


BM25 = f"""
WITH u AS (
    SELECT id, n_keys::float8 AS n, greatest(total_len::float8 / greatest(n_keys, 1), 1.0) AS avgdl
    FROM users WHERE id = %(user_id)s::bigint
), q AS (
    SELECT coalesce(array_agg(DISTINCT l.lexeme), '{{}}') AS lx FROM unnest(to_tsvector('{TEXT_CONFIG}', %(text)s)) l
), m AS (
    SELECT k.pk, k.block_pk, k.kind, k.event_ts, k.dl, k.tsv
    FROM search_keys k, u
    WHERE k.user_id = %(user_id)s::bigint AND k.tsv @@ to_tsquery('{TEXT_CONFIG}', %(tsquery)s)
), t AS (
    SELECT m.pk, l.lexeme, array_length(l.positions, 1)::float8 AS tf
    FROM m, q, unnest(m.tsv) l WHERE l.lexeme = ANY(q.lx)
), df AS (
    SELECT lexeme, count(*)::float8 AS n FROM t GROUP BY lexeme
), s AS (
    SELECT m.block_pk, sum(
        {sql_term_score(sql_idf("u.n", "df.n"), "t.tf", "m.dl", "u.avgdl", "%(k1)s::float8", "%(b)s::float8")}
    ) AS score
    FROM t JOIN df USING (lexeme) JOIN m USING (pk), u
    WHERE true {{filters}}
    GROUP BY m.pk, m.block_pk
)
SELECT block_pk, max(score) AS best FROM s GROUP BY block_pk ORDER BY best DESC, block_pk LIMIT %(k)s
"""


def bm25_top_blocks(
    conn: Conn, user: str, text: str, k: int, scope: Scope = EVERY_BLOCK, *, k1: float = BM25_K1, b: float = BM25_B
) -> list[tuple[int, float]]:
    """BM25 top-k blocks of ``scope`` (a block scores as its best key); the scope narrows the ranked keys,
    not the statistics, as in FTS5."""
    terms = query_terms(text)
    kinds, filters = scope.kinds, scope.filters
    now = now_epoch(scope.now)
    key = user_key(user)
    row = conn.execute(
        f"SELECT id, ({GONE_SQL}) FROM users WHERE id = %(user_id)s AND name = %(user)s",
        {"user_id": key, "now": now, "user": user},
    ).fetchone()
    if not terms or k <= 0 or row is None:
        return []
    user_id, gone = int(row[0]), list(row[1] or [])
    # Terms are \\w+ runs, so quoting each one leaves no room for tsquery syntax; a term the parser splits
    # (``foo_bar``) becomes a phrase.
    params: dict[str, object] = {
        "user_id": user_id,
        "text": " ".join(terms),
        "tsquery": " | ".join(f"'{t}'" for t in terms),
        "k": k,
        "k1": k1,
        "b": b,
        "now": now,
    }
    rules = ""
    if kinds is not None:
        rules += " AND m.kind = ANY(%(kinds)s::text[])"
        params["kinds"] = sorted(kinds)
    rules += _window("m.event_ts", scope.after, scope.before, params)
    if restricts(filters):
        assert filters is not None
        rules += (
            " AND EXISTS (SELECT 1 FROM blocks b WHERE b.user_id = %(user_id)s::bigint AND b.pk = m.block_pk "
            f"AND {LIVE}{filter_sql(filters.pre, params)})"
        )
    elif gone:
        rules += " AND m.block_pk <> ALL(%(gone)s::bigint[])"
        params["gone"] = gone
    rows = conn.execute(BM25.replace("{filters}", rules), params).fetchall()
    return [(int(pk), float(score)) for pk, score in rows]


# The session-words ranking's counts (memlane.core.ranking.session_words): a session is the people's words of
# its blocks together (``blocks.words``, migration 2). Two reads (the query terms' per-session frequencies from
# ``session_terms``, and the sessions' lengths from ``session_lengths``: both kept by every write, one row per
# session and term, one per session); the arithmetic is the ranking's. A single statement over keys, blocks
# and per-session aggregates was planned into nested loops over every session when statistics were stale
# (430 ms for a 10k-block user), unnesting the words of every matching block cost 45-70 ms at 10k blocks, and
# summing the lengths of every block from an index 13.5 ms until a VACUUM had set the visibility map
# (migration 3 replaced it).
SESSION_LENGTHS = "SELECT session_id, words FROM session_lengths WHERE user_id = %(user_id)s::bigint"


SESSION_TFS = f"""
SELECT session_id, lexeme, tf FROM session_terms
WHERE user_id = %(user_id)s::bigint
  AND lexeme = ANY(ARRAY(SELECT x.lexeme FROM unnest(to_tsvector('{TEXT_CONFIG}', %(text)s)) x))
"""


def session_word_counts(conn: Conn, user: str, text: str, sessions: Sequence[str]) -> SessionWordCounts | None:
    """The query terms' counts in the user's sessions that hold any of them (one row each), the user's
    session count and mean length, and the rows of the asked ``sessions``; None when no session holds a
    query term."""
    terms = query_terms(text)
    user_id = _user_id(conn, user)
    if not terms or not sessions or user_id is None:
        return None
    params: dict[str, object] = {"user_id": user_id, "text": " ".join(terms)}
    tfs = conn.execute(SESSION_TFS, params).fetchall()
    if not tfs:  # no session holds a query word: the lengths are not needed
        return None
    return word_counts(tfs, conn.execute(SESSION_LENGTHS, params).fetchall(), sessions)


def word_counts(
    tfs: Sequence[tuple[Any, ...]], session_lengths: Sequence[tuple[Any, ...]], sessions: Sequence[str]
) -> SessionWordCounts:
    """The counts from the rows of :data:`SESSION_TFS` (at least one) and :data:`SESSION_LENGTHS`, with the
    rows of the asked ``sessions``."""
    lengths = {str(s): float(n) for s, n in session_lengths}
    rows: dict[str, int] = {}
    columns: dict[str, int] = {}
    cells = [(rows.setdefault(str(s), len(rows)), columns.setdefault(str(x), len(columns)), n) for s, x, n in tfs]
    tf = np.zeros((len(rows), len(columns)), dtype=np.float64)
    for row, column, count in cells:
        tf[row, column] = float(count)
    held = np.array([lengths[s] for s in rows], dtype=np.float64)
    avgdl = sum(lengths.values()) / len(lengths)
    wanted = {s: rows[s] for s in sessions if s in rows}
    return SessionWordCounts(tf, held, len(lengths), avgdl, wanted)
