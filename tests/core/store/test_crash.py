"""kill -9 during ingest loses no acknowledged add and leaves the store consistent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore

WRITER = textwrap.dedent(
    """
    import sys
    from memlane.core.embedding.fake import HashingEmbedder
    from memlane.core.memory import Memory
    mem = Memory.open(sys.argv[1], embedder=HashingEmbedder(), durability=sys.argv[2])
    i = 0
    while True:
        msgs = [{"role": "user", "content": f"message {i} " + "word " * (i % 50)},
                {"role": "assistant", "content": f"reply {i}"}]
        res = mem.add(f"user{i % 3}", msgs, session_id=f"s{i}")
        # Printed only after add returned: these are the acknowledged writes.
        print(f"{res.user} " + " ".join(res.block_ids), flush=True)
        i += 1
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["full", "normal"])
def test_kill_9_during_ingest_loses_no_acknowledged_add(tmp_path: Path, durability: str) -> None:
    db = tmp_path / "crash.db"
    acked: list[tuple[str, list[str]]] = []
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), durability],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        target = 40 + 17 * round_
        for _ in range(target):
            line = proc.stdout.readline()
            assert line, "writer died before acknowledging"
            user, *ids = line.split()
            acked.append((user, ids))
        os.kill(proc.pid, signal.SIGKILL)  # mid-ingest: the writer is inside its next add
        proc.wait()
        # The writer may have run ahead of this reader: what it printed before dying was acknowledged too.
        for line in proc.stdout.read().splitlines():
            user, *ids = line.split()
            if ids:  # a line cut by the kill acknowledges nothing
                acked.append((user, ids))
        proc.stdout.close()

    mem = Memory(SqliteStore(db), HashingEmbedder())
    for user, ids in acked:
        for bid in ids:
            assert mem.get(user, bid).id == bid
    stored = sum(u.blocks for u in mem.users())
    acked_blocks = sum(len(ids) for _, ids in acked)
    # At most one unacknowledged add per round may have committed just before the kill.
    assert acked_blocks <= stored <= acked_blocks + 3 * 2
    assert mem.store.integrity_check() == []
    # Search still works and sees the acknowledged blocks.
    assert mem.search("user0", "message 0", k=5)
