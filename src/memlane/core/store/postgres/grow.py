"""Adding shards to a sharded store: every user stays where they are, found through the shard map.

A user's home shard depends on the number of shards, so with more shards most users' homes change. Growing
therefore moves no data: it writes, at each user's new home, a ``shard_map`` row that points at the shard
the user is on now (users whose home does not change need none), and only then records the new count on
every shard. Users can be moved to the new shards afterwards, one by one (:func:`~memlane.core.store.
postgres.moves.move_user`).

The steps, each safe to interrupt (run it again to finish):

1. **pin**: for every user, the map row at their new home (idempotent upserts).
2. **count**: each shard records the new count. Until all have, a store opened with either list is
   refused on the shards that disagree, so no process routes by a half-changed count.
3. **tidy**: map rows at shards that are no longer the user's home are deleted.

Writers must be stopped while a store grows: a process still routing by the old count could create a
user after the pin step, at a home the new count does not look at. The new servers must hold no users.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memlane.core.errors import ConfigError, StoreError
from memlane.core.store.postgres.shard import MOVING, home_shard
from memlane.core.store.postgres.sharded import ShardedStore


@dataclass(frozen=True)
class GrowReport:
    old: int
    new: int
    users: int  # users on the store
    pinned: int  # map rows written at new homes
    tidied: int  # map rows deleted where a shard is no longer the home


def grow(old_urls: Sequence[str], new_urls: Sequence[str], *, schema: str | None = None) -> GrowReport:
    """Grow the store on ``old_urls`` to ``new_urls`` (the same servers in the same order, then the added
    ones); a rerun after an interruption finishes it, a rerun after it finished does nothing."""
    n, m = len(old_urls), len(new_urls)
    if m <= n or list(new_urls[:n]) != list(old_urls):
        raise ConfigError("the new list must be the old one, in the same order, followed by the added servers")
    store = ShardedStore(new_urls, schema=schema, accept_counts=(n,), pool_max=2)
    try:
        counts = {s.recorded_count for s in store.shards[:n]}
        pinned = users = 0
        if counts != {m}:
            for shard in store.shards[n:]:
                if shard.list_users():
                    raise ConfigError(f"the added server {shard._where} already holds users")
            pinned, users = _pin(store, n)
            for shard in store.shards:
                shard.record_count(m)
        tidied = _tidy(store)
        if not users:
            users = sum(len(s.list_users()) for s in store.shards)
        return GrowReport(old=n, new=m, users=users, pinned=pinned, tidied=tidied)
    finally:
        store.close()


def _pin(store: ShardedStore, n: int) -> tuple[int, int]:
    """Map rows at the new homes for every user of the old shards; (rows written, users seen)."""
    m = store.count
    for shard in store.shards:
        moving = shard.query("SELECT name FROM shard_moves WHERE state = %s LIMIT 1", (MOVING,))
        if moving:
            raise StoreError(f"user {moving[0][0]!r} is being moved: finish that move (memlane shards move) first")
    pinned = users = 0
    for shard in store.shards[:n]:
        for info in shard.list_users():
            users += 1
            where = shard.index
            home = home_shard(info.name, m)
            with store.shards[home].transaction() as conn:
                if home == where:
                    conn.execute("DELETE FROM shard_map WHERE name = %s", (info.name,))
                else:
                    conn.execute(
                        "INSERT INTO shard_map(name, shard, moved_at) VALUES (%s, %s, extract(epoch FROM now())) "
                        "ON CONFLICT (name) DO UPDATE SET shard = EXCLUDED.shard",
                        (info.name, where),
                    )
                    pinned += 1
    return pinned, users


def _tidy(store: ShardedStore) -> int:
    tidied = 0
    for shard in store.shards:
        for (name,) in shard.query("SELECT name FROM shard_map"):
            if home_shard(str(name), store.count) != shard.index:
                with shard.transaction() as conn:
                    tidied += conn.execute("DELETE FROM shard_map WHERE name = %s", (name,)).rowcount
    return tidied
