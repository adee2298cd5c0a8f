"""`memlane add --extract sync` against an LLM server that is not there: it says what it is waiting for,
ends with the jobs' outcome and exit 1, and keeps the blocks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from memlane.core.memory import Memory

CLI = "import sys; from memlane.interfaces.cli import main; sys.argv[0] = 'memlane'; main()"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_sync_extraction_with_no_server_reports_and_exits_1(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")},
        "MEMLANE_STORE": str(store),
        "MEMLANE_EMBEDDER": "hashing",
        "MEMLANE_LLM_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1",
        "MEMLANE_LLM_MODEL": "m",
        "MEMLANE_LLM_API_KEY": "k",
        "MEMLANE_LLM_MAX_RETRIES": "1",
    }
    messages = [{"role": "user", "content": "My sister Ana moved to Lisbon."}, {"role": "assistant", "content": "Ok"}]
    proc = subprocess.run(
        [sys.executable, "-c", CLI, "add", "alice", "--extract", "sync"],
        input=json.dumps(messages),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "added 2 blocks" in proc.stdout and "extraction: 0 of 2 jobs done" in proc.stdout
    assert "retry 1 of 1" in proc.stderr  # the wait is explained while it happens
    assert "2 stay queued for `memlane worker`" in proc.stderr and "Traceback" not in proc.stderr
    mem = Memory.open(store, embedder="hashing")
    try:
        assert len(mem.list("alice")) == 2  # the blocks are kept, searchable
        status = mem.queue_status()
        assert (status.queued, status.dead) == (2, 0)  # left for a worker, not burnt
    finally:
        mem.close()
