"""When and how a store answers a user's vector search with an approximate (HNSW) index instead of an
exact scan: settings of the store (``SqliteStore(path, ann=...)``, ``PostgresStore(url, ann=...)``).

They are store options, not search settings, because they change how a store finds the top keys, not how
memlane ranks them: an approximate search returns the same blocks with the same scores as the exact scan
for every key it finds (both engines rescore the index's candidates exactly), and the index is data the
store keeps beside the user's vectors. Below ``threshold`` keys a user is searched exactly, as always.
The defaults and the measurements behind them are in docs/scaling.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlane.core.errors import ConfigError

DEFAULT_THRESHOLD = 20_000


@dataclass(frozen=True)
class AnnSettings:
    """* ``threshold``: users with at least this many search keys get an index (0: every user; None: no
      index at all, every search exact);
    * ``m``, ``ef_construction``: the HNSW graph's links per node and its build-time beam;
    * ``ef_search``: the search beam; a search asks the index for at least ``4 k + 32`` keys (a block may
      own several keys; SQLite asks for that many graph nodes, one per distinct vector) and the beam is
      never narrower than that;
    * ``background`` (SQLite): build, load and extend indexes on a thread of their own while searches stay
      exact (True), or inside the search that needs them (False: for tests and benchmarks);
    * ``build``: whether a search that finds a user's index missing or stale starts building, extending or
      rebuilding it (True), or uses the saved index as it is and otherwise scans exactly (False: for a
      process that will not live to finish a build, such as one ``memlane`` command; ``memlane index
      build``, i.e. ``Store.build_index``, makes the index). A stale index still answers right.
    """

    threshold: int | None = DEFAULT_THRESHOLD
    m: int = 16
    ef_construction: int = 100
    ef_search: int = 128
    background: bool = True
    build: bool = True

    def __post_init__(self) -> None:
        if self.threshold is not None and self.threshold < 0:
            raise ConfigError(f"ann threshold must be 0 or more, not {self.threshold}")
        for name in ("m", "ef_construction", "ef_search"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:
                raise ConfigError(f"ann {name} must be an integer of at least 2, not {value!r}")

    def applies(self, keys: int) -> bool:
        """Whether a user holding ``keys`` keys is searched through an index."""
        return self.threshold is not None and keys >= max(self.threshold, 1)


EXACT = AnnSettings(threshold=None)


@dataclass(frozen=True)
class IndexStatus:
    """Where a user's approximate index stands (``memlane index status``):

    * ``keys``: the user's search keys; ``needed``: at or past the threshold, so searches go through the
      index once there is one (below it they scan exactly and an index is never used);
    * ``state``: ``none``; ``ready`` (searches use it); ``stale`` (SQLite: still used and right, but so many
      keys were added since it was saved, or deleted from it, that a build would extend or rebuild it);
      ``building`` (PostgreSQL: being made, or left unusable by an interrupted build);
    * ``indexed``: keys the index holds; ``tail`` (SQLite): keys added since it was saved, which every search
      scans exactly; ``deleted`` (SQLite): keys deleted since, still in the graph and skipped.
    """

    user: str
    keys: int
    needed: bool
    state: str
    indexed: int = 0
    tail: int = 0
    deleted: int = 0
