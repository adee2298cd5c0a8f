"""What it costs that a deletion or an update leaves the old text's vector in no file of the SQLite store
(docs/scaling.md, section 4, "Deleted vectors").

    .venv/bin/python scripts/bench_ann_scrub.py --blocks 20000 100000

For each size, a fresh store in a temporary folder (durability "full", the default) gets one user with
that many blocks, each with its own random unit 384-d vector (as MiniLM's), and their approximate index
is built and saved (`memlane index build`). Then, side by side in alternating order:

* deletions of one block each: as memlane does them (the block's vector overwritten in the index file
  before the deletion returns), and with no scrub (the journal turned off: the vector stays in the file,
  as before);
* updates in place of one block's text: as memlane does them (the old vector overwritten in the index
  file and in the store's segment, and the write-ahead log truncated), with no scrub (the log still
  truncated), and as before (neither).

Prints each arm's p50 and p95, the ratio of memlane's p50 to each, and how long building and saving the
index took.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory, new_block_id
from memlane.core.model import BlockKind, ExtractionStatus, MemoryBlock, PerspectiveMode, content_hash
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore, annscrub, keys
from memlane.core.timefmt import annotate

DIM = 384
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def blocks(n: int) -> list[MemoryBlock]:
    out = []
    for i in range(n):
        text = f"user: note {i}"
        ev = T0 + timedelta(minutes=i)
        out.append(
            MemoryBlock(
                id=new_block_id(), user="u", conversation_id="c", session_id=f"s{i // 100}",
                exchange_index=i % 100, perspective="exchange", mode=PerspectiveMode.SINGLE, message=text,
                event_time=ev, ingest_time=T0, time_annotation=annotate(ev), content_hash=content_hash(text),
                extraction_status=ExtractionStatus.OFF, kind=BlockKind.FACT,
            )
        )  # fmt: skip
    return out


@contextlib.contextmanager
def arm(store: SqliteStore, name: str) -> Iterator[None]:
    """``memlane``: as memlane does it. ``no scrub``: deleted keys are not journalled (so their vectors
    stay in the index file) and retired keys are not blanked in their segment. ``before``: also no
    checkpoint after an update (memlane before these changes; a deletion checkpointed already)."""
    journal, blank, checkpoint = annscrub.journal, keys.blank_keys, store.checkpoint
    if name != "memlane":
        annscrub.journal = lambda *a, **k: None  # type: ignore[assignment]
        keys.blank_keys = lambda *a, **k: None  # type: ignore[assignment]
    if name == "before":
        store.checkpoint = lambda: True  # type: ignore[method-assign]
    try:
        yield
    finally:
        annscrub.journal, keys.blank_keys = journal, blank  # type: ignore[assignment]
        store.checkpoint = checkpoint  # type: ignore[method-assign]


def side_by_side(
    pairs: int, run: Callable[[int], None], store: SqliteStore, names: list[str]
) -> dict[str, list[float]]:
    """``run(i)`` timed in each arm, the arms' order rotating from one round to the next."""
    timed: dict[str, list[float]] = {name: [] for name in names}
    calls = 0
    for i in range(pairs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            with arm(store, name):
                t0 = time.perf_counter()
                run(calls)
                timed[name].append(time.perf_counter() - t0)
            calls += 1
    return timed


def report(what: str, timed: dict[str, list[float]]) -> None:
    base = statistics.median(timed["memlane"])
    parts = [
        f"{name} p50 {statistics.median(xs) * 1000:.2f} ms (p95 {float(np.percentile(xs, 95)) * 1000:.2f}, "
        f"memlane/this {base / statistics.median(xs):.2f})"
        for name, xs in timed.items()
    ]
    print(f"  {what}: " + "; ".join(parts))


def measure(n: int, pairs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "bench.db", ann=AnnSettings(threshold=0, background=False, build=False))
        mem = Memory(store, HashingEmbedder(DIM))
        try:
            made = blocks(n)
            for start in range(0, n, 2000):
                v = rng.normal(size=(min(2000, n - start), DIM)).astype(np.float32)
                store.write_blocks("u", made[start : start + 2000], v / np.linalg.norm(v, axis=1, keepdims=True))
            t0 = time.perf_counter()
            store.build_index("u")
            built = time.perf_counter() - t0
            (index,) = (Path(folder) / "bench.db.ann").glob("*.hnsw")
            print(f"{n} blocks: index built and saved in {built:.1f} s, {index.stat().st_size / 1e6:.0f} MB")
            ids = [b.id for b in made]
            order = rng.permutation(n).tolist()
            deletes = side_by_side(pairs, lambda i: mem.delete("u", ids[order[i]]), store, ["memlane", "no scrub"])
            report("delete", deletes)
            rest = order[2 * pairs :]
            updated = side_by_side(
                pairs,
                lambda i: mem.update("u", ids[rest[i]], content=f"new text {i}"),
                store,
                ["memlane", "no scrub", "before"],
            )
            report("update", updated)
        finally:
            mem.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--pairs", type=int, default=100, help="deletions (and updates) in each arm")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    for n in args.blocks:
        measure(n, args.pairs, args.seed)


if __name__ == "__main__":
    main()
