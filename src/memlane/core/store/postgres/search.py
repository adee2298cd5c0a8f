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

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import Filters
from memlane.core.ranking.bm25 import BM25_B, BM25_K1, sql_idf, sql_term_score
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.annsettings import EXACT, AnnSettings
from memlane.core.store.keyword import query_terms
from memlane.core.store.postgres.adapt import PgVector
from memlane.core.store.postgres.ann import index_name, set_search
from memlane.core.store.postgres.blockrows import LIVE, filter_sql, now_epoch, restricts
from memlane.core.store.postgres.keys import Conn
from memlane.core.store.postgres.schema import TEXT_CONFIG
from memlane.core.store.vectors import KIND_CODES


def _user_id(conn: Conn, user: str, *, index_only: bool = False) -> int | None:
    """The user's id, looked up first so the search is planned for this user, not an average one.

    ``index_only`` also turns sequential scans off for the rest of the transaction (in the same round
    trip): a per-user scan belongs on the ``(user_id, ...)`` key, but with statistics gone stale (right
    after a bulk load, measured) the planner chose a parallel scan of every user's vectors, 33-55 ms for a
    10k user instead of 5-6."""
    setting = ", set_config('enable_seqscan', 'off', true)" if index_only else ""
    row = conn.execute(f"SELECT id{setting} FROM users WHERE name = %s", (user,)).fetchone()
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
    *,
    kinds: frozenset[str] | None = None,
    after: float | None = None,
    before: float | None = None,
    ann: AnnSettings = EXACT,
    build_index: Callable[[int], None] = lambda _user_id: None,
    filters: Filters | None = None,
    now: float | None = None,
) -> list[tuple[int, float]]:
    """Top-k blocks by cosine similarity; a block scores as its best key. Exact, or for a user of at least
    ``ann.threshold`` keys through the user's HNSW index (:mod:`memlane.core.store.postgres.ann`) once it
    is made; ``build_index`` is called with the user's id when the user has none yet.

    Blocks expired at ``now`` are never candidates: without filters, the user's expired blocks not swept
    yet (an index probe of ``blocks_user_expiry``, empty for a user without TTLs) are left out by
    reference; with filters (:attr:`Filters.pre`), the pool is the live blocks that pass them. A pool of at
    most :func:`exact_pool` blocks is scored exactly, key by key; a wider one filters the user's scan by a
    semi-join on the block (for a user searched exactly, the exact scan).
    Past that, the HNSW index's iterative scan is filtered (a semi-join on the block), within a budget of
    :data:`SCAN_BUDGET` rows per row asked; if it comes up short, the pool is scored exactly instead."""
    now = now_epoch(now)
    row = conn.execute(
        "SELECT id, n_keys, set_config('enable_seqscan', 'off', true), "
        "(SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s || id)), "
        f"({_GONE}) FROM users WHERE name = %s",
        (index_name(0).removesuffix("0"), user, now, user),
    ).fetchone()
    if k <= 0 or row is None:
        return []
    user_id, n_keys, _, valid, gone = int(row[0]), int(row[1]), row[2], row[3], list(row[4] or [])
    approximate = ann.applies(n_keys)
    if approximate and not valid:
        build_index(user_id)
    approximate = approximate and bool(valid)
    params: dict[str, object] = {"user_id": user_id, "q": PgVector(query.reshape(-1)), "now": now}
    where = "v.user_id = %(user_id)s::bigint"  # psycopg would send a small id as int2
    if kinds is not None and len(kinds) < len(KIND_CODES):
        where += " AND v.kind = ANY(%(kinds)s::smallint[])"
        params["kinds"] = sorted(KIND_CODES[x] for x in kinds)
    where += _window("v.event_ts", after, before, params)
    base, rules, budget = where, None, None
    if restricts(filters):
        assert filters is not None
        rules = filter_sql(filters.pre, params)
        cap = exact_pool(n_keys, approximate)
        pool = _pool(conn, rules, params, cap + 1)
        if len(pool) <= cap:  # the pool's keys one by one
            return _exact_pool(conn, pool, base, params, k)
        # A wider pool: the user's scan (exact, or the index's within a budget), keeping the pool's keys
        budget = SCAN_BUDGET if approximate else None
        where += (
            " AND EXISTS (SELECT 1 FROM blocks b WHERE b.user_id = %(user_id)s::bigint AND b.pk = v.block_pk "
            f"AND {LIVE}{rules})"
        )
    elif gone:
        where += " AND v.block_pk <> ALL(%(gone)s::bigint[])"
        params["gone"] = gone
    # The user's index is on the vector cast to its width (memlane.core.store.postgres.ann): the same
    # expression here lets the planner use it.
    column = f"v.embedding::vector({int(query.size)})" if approximate else "v.embedding"
    statement = f"SELECT v.block_pk, {column} <#> %(q)s AS d FROM key_vectors v WHERE {where} ORDER BY d LIMIT %(n)s"
    # A block may own several keys: take enough keys to find k distinct blocks, widening if needed.
    want = max(4 * k, k + 32)
    while True:
        params["n"] = want
        if approximate:
            set_search(conn, ann, want, None if budget is None else budget * want)
        rows = conn.execute(statement, params).fetchall()
        best = _best(rows, k)
        if len(best) == k:
            return list(best.items())
        if len(rows) < want:
            if approximate and rules is not None:
                # the iterative scan gave up before the filtered pool ran out: score the pool exactly
                return _exact_pool(conn, _pool(conn, rules, params, None), base, params, k)
            return list(best.items())
        want *= 4


# The user's blocks expired at ``now`` and not swept yet: what an unfiltered search leaves out (from the
# partial index blocks_user_expiry, which a user without TTLs has no entry in).
_GONE = (
    "SELECT array_agg(b.pk) FROM blocks b WHERE b.user_id = (SELECT id FROM users WHERE name = %s) "
    "AND b.expires_ts <= %s"
)


def exact_pool(n_keys: int, approximate: bool) -> int:
    """The most blocks a filtered vector search scores exactly, key by key (~7 us a key, measured),
    instead of filtering the user's scan (~1 us a key exactly): a sixteenth of the user's keys, and past
    the ANN threshold at least :data:`EXACT_POOL_MIN` blocks. Narrower filters are where the HNSW index's
    filtered scan loses recall (measured at 20k blocks: 0.82 at 10 of a filter keeping 1%, 0.997 keeping
    10%)."""
    return n_keys // 16 if not approximate else max(EXACT_POOL_MIN, n_keys // 16)


EXACT_POOL_MIN = 2000  # blocks a filtered search past the ANN threshold always scores exactly
# How many keys (per key asked for) a filtered search walks through the HNSW index before it scores the
# filtered pool exactly instead: the index finds the asked keys within this budget when the filter keeps at
# least about 1 in SCAN_BUDGET of the user's keys (the pools of narrower ones are scored exactly anyway).
SCAN_BUDGET = 16


def _pool(conn: Conn, rules: str, params: dict[str, object], limit: int | None) -> list[int]:
    """The live blocks of the user that pass the filter ``rules`` (at most ``limit``)."""
    rows = conn.execute(
        f"SELECT b.pk FROM blocks b WHERE b.user_id = %(user_id)s::bigint AND {LIVE}{rules}"
        + ("" if limit is None else f" LIMIT {int(limit)}"),
        params,
    ).fetchall()
    return [int(r[0]) for r in rows]


def _exact_pool(conn: Conn, pool: list[int], where: str, params: dict[str, object], k: int) -> list[tuple[int, float]]:
    """Exact top-k of the blocks ``pool``: every key of theirs (through the keys' block index) scored."""
    if not pool:
        return []
    rows = conn.execute(
        "SELECT v.block_pk, v.embedding <#> %(q)s AS d FROM search_keys k "
        "JOIN key_vectors v ON v.user_id = k.user_id AND v.key_pk = k.pk "
        f"WHERE k.user_id = %(user_id)s::bigint AND k.block_pk = ANY(%(pool)s::bigint[]) AND {where} ORDER BY d",
        {**params, "pool": pool},
    ).fetchall()
    return list(_best(rows, k).items())


def _best(rows: Sequence[tuple[Any, ...]], k: int) -> dict[int, float]:
    """The first ``k`` distinct blocks of key rows (block pk, negative inner product) in distance order."""
    best: dict[int, float] = {}
    for pk, d in rows:
        if int(pk) not in best:
            best[int(pk)] = -float(d)  # <#> is the negative inner product
            if len(best) == k:
                break
    return best


_BM25 = f"""
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
    conn: Conn,
    user: str,
    text: str,
    k: int,
    *,
    kinds: frozenset[str] | None = None,
    after: float | None = None,
    before: float | None = None,
    k1: float = BM25_K1,
    b: float = BM25_B,
    filters: Filters | None = None,
    now: float | None = None,
) -> list[tuple[int, float]]:
    """BM25 top-k blocks (a block scores as its best key); the filters narrow the ranked keys, not the
    statistics, as in FTS5. Blocks expired at ``now`` are never ranked (as in :func:`vector_top_blocks`)."""
    terms = query_terms(text)
    now = now_epoch(now)
    row = conn.execute(f"SELECT id, ({_GONE}) FROM users WHERE name = %s", (user, now, user)).fetchone()
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
    rules += _window("m.event_ts", after, before, params)
    if restricts(filters):
        assert filters is not None
        rules += (
            " AND EXISTS (SELECT 1 FROM blocks b WHERE b.user_id = %(user_id)s::bigint AND b.pk = m.block_pk "
            f"AND {LIVE}{filter_sql(filters.pre, params)})"
        )
    elif gone:
        rules += " AND m.block_pk <> ALL(%(gone)s::bigint[])"
        params["gone"] = gone
    rows = conn.execute(_BM25.replace("{filters}", rules), params).fetchall()
    return [(int(pk), float(score)) for pk, score in rows]


# The session-words ranking's counts (memlane.core.ranking.session_words): a session is the people's words of
# its blocks together (``blocks.words``, migration 2). Two reads (the query terms' per-session frequencies from
# ``session_terms``, and the sessions' lengths from ``session_lengths``: both kept by every write, one row per
# session and term, one per session); the arithmetic is the ranking's. A single statement over keys, blocks
# and per-session aggregates was planned into nested loops over every session when statistics were stale
# (430 ms for a 10k-block user), unnesting the words of every matching block cost 45-70 ms at 10k blocks, and
# summing the lengths of every block from an index 13.5 ms until a VACUUM had set the visibility map
# (migration 3 replaced it).
_SESSION_LENGTHS = "SELECT session_id, words FROM session_lengths WHERE user_id = %(user_id)s::bigint"
_SESSION_TFS = f"""
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
    tfs = conn.execute(_SESSION_TFS, params).fetchall()
    if not tfs:  # no session holds a query word: the lengths are not needed
        return None
    lengths = {str(s): float(n) for s, n in conn.execute(_SESSION_LENGTHS, params).fetchall()}
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
