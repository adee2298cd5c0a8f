"""What a search reads from the SQLite store: each retriever's candidates over the user's cached indexes (exact
vectors or the approximate index, BM25 over the term bags), the session-words counts and the blocks' positions.
:class:`SqliteCandidates` is the store's :class:`memlane.core.store.candidates.Candidates`."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import (
    NotFoundError,
)
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.blocks.sqlite_rows import expired_block_pks, filtered_block_pks
from memlane.core.store.candidates.annsettings import IndexStatus
from memlane.core.store.candidates.gather import Gather, Gathered, Ranked, gather_stepwise
from memlane.core.store.candidates.scope import EVERY_BLOCK, Scope
from memlane.core.store.candidates.terms import UserTerms, bm25_top_blocks, session_word_counts
from memlane.core.store.candidates.vectors import KIND_CODES, BlockSet, KeyRules, UserMatrix, top_blocks
from memlane.core.store.sqlite.ann import status as ann_status
from memlane.core.store.sqlite.base import SqliteBase, time_now
from memlane.core.store.sqlite.keys import load_user_index
from memlane.core.store.sqlite.probe import store_error
from memlane.core.store.sqlite.terms import query_weights

# A filter that keeps fewer blocks than this share of a user's keys is searched exactly over what it keeps,
# not through the approximate index (docs/design/007-memory-model.md, "Filters").
ANN_MIN_SHARE = 0.05


# (query, data_version, total_changes) and the query's weights then: see SqliteCandidates._query_weights
_QueryMemo = tuple[tuple[str, int, int], tuple[list[tuple[int, float]], float]]


def _too_narrow(blocks: BlockSet | None, matrix: UserMatrix) -> bool:
    """Whether a filter keeps so few blocks that scoring their keys exactly beats the approximate index
    (which would have to be asked for ever more proposals to find k that pass)."""
    return blocks is not None and blocks.allow and blocks.pks.size < ANN_MIN_SHARE * matrix.n


class SqliteCandidates(SqliteBase):
    """What a search reads from a SQLite store."""

    def vector_candidates(self, user: str, query: Vectors, k: int, scope: Scope = EVERY_BLOCK) -> Ranked:
        """An exact scan, or for a user past the approximate index's threshold the index's candidates and the
        keys added since it was saved, scored exactly (:mod:`memlane.core.store.sqlite.ann`); a filter that
        keeps few keys is scored exactly over what it keeps."""
        row = self._user_row(user)
        if row is None:
            return []
        matrix = self._matrix(*row)
        rules = self._key_rules(*row, scope)
        if self.ann_settings.applies(matrix.n) and not _too_narrow(rules.blocks, matrix):
            found = self.ann.top_blocks(row[0], matrix, query, k, rules)
            if found is not None:
                return found
        return top_blocks(matrix, query.reshape(-1), k, rules)

    def _key_rules(self, user_id: int, version: int, scope: Scope) -> KeyRules:
        """``scope`` as the user's in-memory indexes read it: its kinds as codes, and what its filters and
        expiry leave of the user's blocks (:meth:`_block_set`)."""
        codes = None if scope.kinds is None else frozenset(KIND_CODES[x] for x in scope.kinds)
        return KeyRules(codes, scope.after, scope.before, self._block_set(user_id, version, scope))

    def _block_set(self, user_id: int, version: int, scope: Scope) -> BlockSet | None:
        """What the scope's filters and expiry leave of the user's blocks: the allowed blocks when a pre-cut
        rule is given, else the expired blocks to leave out (None when there are none: the unfiltered
        search). The blocks a filter keeps are remembered for the user's version (any write moves it on);
        the expired ones are asked for each time (one seek in the partial expiry index)."""
        filters = scope.filters
        at = time_now() if scope.now is None else scope.now
        conn = self._conn()
        try:
            expired = expired_block_pks(conn, user_id, at)
            if filters is None or filters.pre.empty:
                return BlockSet.of(expired, allow=False) if expired else None
            pre = filters.pre
            allowed = self._filtered.get(user_id, version, pre)
            if allowed is None:
                allowed = BlockSet.of(filtered_block_pks(conn, user_id, pre), allow=True)
                self._filtered.put(user_id, version, pre, allowed)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
        return allowed.without(expired) if expired else allowed

    def build_index(self, user: str) -> IndexStatus:
        """Build the user's approximate index now, or bring it up to date (every key added since it was
        saved), and save it, if the user is at or past the threshold (:mod:`memlane.core.store.sqlite.ann`)."""
        row = self._user_row(user)
        if row is None:
            raise NotFoundError(f"user {user!r} not found")
        matrix = self._matrix(*row)
        if matrix.n and self.ann_settings.applies(matrix.n):
            self.ann.build_now(row[0], matrix)
        return ann_status(self._conn(), self.path, self.ann_settings, row[0], user)

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: of every user, by name) stands."""
        rows = self._read("SELECT id, name FROM users" + (" WHERE name = ?" if user is not None else " ORDER BY name"),
                          () if user is None else (user,))  # fmt: skip
        if user is not None and not rows:
            raise NotFoundError(f"user {user!r} not found")
        return [ann_status(self._conn(), self.path, self.ann_settings, int(r[0]), str(r[1])) for r in rows]

    def _matrix(self, user_id: int, version: int) -> UserMatrix:
        cached = self._cache.get(user_id, version)
        return cached if cached is not None else self._load(user_id)[0]

    def _user_terms(self, user_id: int, version: int) -> UserTerms:
        cached = self._terms.get(user_id, version)
        return cached if cached is not None else self._load(user_id)[1]

    def _load(self, user_id: int) -> tuple[UserMatrix, UserTerms]:
        """Read the user's version and both indexes (one read of the user's segments) in one snapshot, so
        the cache entries are exactly that version; cache both."""
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            (version,) = conn.execute("SELECT version FROM users WHERE id = ?", (user_id,)).fetchone()
            matrix, terms = load_user_index(conn, user_id, int(version))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
        self._cache.put(user_id, matrix)
        self._terms.put(user_id, terms)
        return matrix, terms

    def keyword_candidates(
        self, user: str, query: str, k: int, scope: Scope = EVERY_BLOCK, *, k1: float = BM25_K1, b: float = BM25_B
    ) -> Ranked:
        """Over the user's cached term bags (:func:`memlane.core.store.candidates.terms.bm25_top_blocks`)."""
        row = self._user_row(user)
        if row is None:
            return []
        weights, avgdl = self._query_weights(query)
        if not weights:
            return []
        index = self._user_terms(*row)
        return bm25_top_blocks(index, weights, avgdl, k, self._key_rules(*row, scope), k1=k1, b=b)

    def gather(self, user: str, ask: Gather) -> Gathered:
        """A search's reads, one method each: every read is in process here."""
        return gather_stepwise(self, user, ask)

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """The query terms' counts in the user's sessions' people's words
        (:func:`memlane.core.store.candidates.terms.session_word_counts`); None when nothing can match."""
        row = self._user_row(user)
        if row is None or not sessions:
            return None
        weights, _ = self._query_weights(query)
        if not weights:
            return None
        return session_word_counts(self._user_terms(*row), [term for term, _ in weights], sessions)

    def _query_weights(self, query: str) -> tuple[list[tuple[int, float]], float]:
        """:func:`query_weights`, remembered for this thread's last query while the database is unchanged:
        a search asks for the same query's terms twice (its keyword candidates, then the session-words
        ranking), and their lookup costs 0.2-0.8 ms on an x500 user. Unchanged means no commit by another
        connection (``PRAGMA data_version``) and no row changed by this one (``total_changes``)."""
        conn = self._conn()
        try:
            (data_version,) = conn.execute("PRAGMA data_version").fetchone()
            memo: _QueryMemo | None = getattr(self._local, "query_memo", None)
            if memo is not None and memo[0] == (query, int(data_version), conn.total_changes):
                weights, avgdl = memo[1]
                return weights, avgdl
            result = query_weights(conn, query)
        except sqlite3.Error as exc:
            raise store_error(f"read failed on {self.path}", exc, default="read failed") from exc
        # Changes counted after the lookup: tokenizing writes a scratch table of this connection. The data
        # version read before it: a commit elsewhere during the lookup makes the memo miss next time.
        self._local.query_memo = ((query, int(data_version), conn.total_changes), result)
        return result

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time) of the user's blocks by reference, without their text."""
        row = self._user_row(user)
        if row is None:
            return {}
        out: dict[int, tuple[str, int, float]] = {}
        for start in range(0, len(refs), 500):
            chunk = list(refs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._read(
                f"SELECT pk, session_id, exchange_index, event_ts FROM blocks WHERE pk IN ({marks}) AND +user_id = ?",
                [*chunk, row[0]],
            )
            out.update({int(pk): (str(session), int(exchange), float(ts)) for pk, session, exchange, ts in rows})
        return out
