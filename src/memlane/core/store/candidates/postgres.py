"""What a search reads from the PostgreSQL store: each retriever's candidates as SQL
(:mod:`memlane.core.store.candidates.postgres_search`), in one call on the user's node on Citus, the session-
words counts and the blocks' positions. :class:`PostgresCandidates` is the store's
:class:`memlane.core.store.candidates.Candidates`."""

from __future__ import annotations

from collections.abc import Sequence

from memlane.core.embedding.protocol import Vectors
from memlane.core.errors import NotFoundError
from memlane.core.ranking.bm25 import BM25_B, BM25_K1
from memlane.core.ranking.session_words import SessionWordCounts
from memlane.core.store.blocks.postgres_rows import LIVE, now_epoch, restricts
from memlane.core.store.candidates.annsettings import EXACT, IndexStatus
from memlane.core.store.candidates.gather import Gather, Gathered, Ranked, gather_stepwise
from memlane.core.store.candidates.postgres_search import bm25_top_blocks, session_word_counts, vector_top_blocks
from memlane.core.store.candidates.scope import EVERY_BLOCK, Scope
from memlane.core.store.postgres import ann, delegated
from memlane.core.store.postgres.base import PostgresBase
from memlane.core.store.postgres.tenant import user_key


class PostgresCandidates(PostgresBase):
    """What a search reads from a PostgreSQL store."""

    def vector_candidates(self, user: str, query: Vectors, k: int, scope: Scope = EVERY_BLOCK) -> Ranked:
        """Computed in the database: an exact scan, or past the threshold the user's HNSW index
        (:mod:`memlane.core.store.postgres.ann`); the scope as
        :func:`memlane.core.store.candidates.postgres_search.vector_top_blocks` applies it. On Citus a
        search without filters runs on the user's node (:meth:`gather`), through the index on the user's
        shard; a filtered one is routed statement by statement, and scans exactly."""
        if self.citus and not restricts(scope.filters):
            read = self._on_users_node(user, Gather("", query, False, k, scope))
            if read is not None:
                return read.rankings["vector"]
        unindexed: list[int] = []
        with self.transaction() as conn:
            ann = EXACT if self.citus else self.ann_settings
            found = vector_top_blocks(conn, user, query, k, scope, ann=ann, build_index=unindexed.append)
        # After the search's transaction: CREATE INDEX CONCURRENTLY waits for every older transaction.
        for user_id in unindexed:
            self.ann.ensure(user_id)
        return found

    def build_index(self, user: str) -> IndexStatus:
        """Make the user's approximate index now, if the user is at or past the threshold and has none
        (:mod:`memlane.core.store.postgres.ann`)."""
        user_id, keys = self._index_user(user)
        if self.ann_settings.applies(keys):
            self.ann.build_now(user_id)
        return self.index_status(user)[0]

    def index_status(self, user: str | None = None) -> list[IndexStatus]:
        """Where the approximate index of ``user`` (default: of every user, by name) stands."""
        if user is not None:
            rows = [(*self._index_user(user), user)]
        else:
            rows = [(int(i), int(n), str(name)) for i, n, name in self.query(
                "SELECT id, n_keys, name FROM users ORDER BY name")]  # fmt: skip
        return [self._index_status(i, name, n) for i, n, name in rows]

    def _index_status(self, user_id: int, user: str, keys: int) -> IndexStatus:
        if self.citus and not self.ann_settings.applies(keys):  # below the threshold: its worker is not asked
            return IndexStatus(user, keys, False, "none")
        place = self._ann_place(user_id)
        with place.connect() as conn:
            return ann.status(conn, self.ann_settings, place.index, user, keys)

    def _index_user(self, user: str) -> tuple[int, int]:
        rows = self.query("SELECT id, n_keys FROM users WHERE id = %s AND name = %s", (user_key(user), user))
        if not rows:
            raise NotFoundError(f"user {user!r} not found")
        return int(rows[0][0]), int(rows[0][1])

    def keyword_candidates(
        self, user: str, query: str, k: int, scope: Scope = EVERY_BLOCK, *, k1: float = BM25_K1, b: float = BM25_B
    ) -> Ranked:
        """Computed in the database (:func:`memlane.core.store.candidates.postgres_search.bm25_top_blocks`)."""
        with self.transaction() as conn:
            return bm25_top_blocks(conn, user, query, k, scope, k1=k1, b=b)

    def gather(self, user: str, ask: Gather) -> Gathered:
        """A search's reads: on Citus, without filters, in one call of a function the coordinator hands to the
        user's node (:mod:`memlane.core.store.postgres.delegated`); otherwise one method each."""
        if self.citus and not restricts(ask.scope.filters):
            found = self._on_users_node(user, ask)
            if found is not None:
                return found
        return gather_stepwise(self, user, ask)

    def _on_users_node(self, user: str, ask: Gather) -> Gathered | None:
        """``ask`` read by the function on the user's node; None if the user's shard moved as the call went
        out (the caller reads through the coordinator). A user past the threshold with no index gets one."""
        user_id = user_key(user)
        try:
            with self.autocommit() as conn:
                found, unindexed = delegated.gather(
                    conn, user, user_id, ask, self.ann_settings, now_epoch(ask.scope.now)
                )
        except delegated.Elsewhere:
            return None
        if unindexed:
            self.ann.ensure(user_id)
        return found

    def session_word_counts(self, user: str, query: str, sessions: Sequence[str]) -> SessionWordCounts | None:
        """The query terms' counts in the user's sessions' people's words
        (:func:`memlane.core.store.candidates.postgres_search.session_word_counts`); None when nothing can match."""
        if not sessions:
            return None
        with self.transaction() as conn:
            return session_word_counts(conn, user, query, sessions)

    def block_positions(self, user: str, refs: Sequence[int]) -> dict[int, tuple[str, int, float]]:
        """(session id, exchange index, event time) of the user's blocks by reference, without their text."""
        if not refs:
            return {}
        rows = self.query(
            "SELECT b.pk, b.session_id, b.exchange_index, b.event_ts FROM blocks b JOIN users u ON u.id = b.user_id "
            f"WHERE u.id = %(uid)s AND b.user_id = %(uid)s AND u.name = %(user)s AND b.pk = ANY(%(refs)s) AND {LIVE}",
            {"user": user, "uid": user_key(user), "refs": list(refs), "now": now_epoch()},
        )
        return {int(pk): (str(session), int(exchange), float(ts)) for pk, session, exchange, ts in rows}
