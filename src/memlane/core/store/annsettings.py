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
      own several keys) and the beam is never narrower than that;
    * ``background`` (SQLite): build, load and extend indexes on a thread of their own while searches stay
      exact (True), or inside the search that needs them (False: for tests and benchmarks).
    """

    threshold: int | None = DEFAULT_THRESHOLD
    m: int = 16
    ef_construction: int = 100
    ef_search: int = 128
    background: bool = True

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
