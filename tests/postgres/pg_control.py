"""Control of the test server's process, for the tests that stop and restart it."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class PgServer:
    """Stops and starts the test server (as the data folder's owner: the server refuses to run as root)."""

    data: Path
    pg_ctl: str

    def _run(self, *args: str) -> None:
        cmd = [self.pg_ctl, "-D", str(self.data), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", self.data.owner(), "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def crash(self) -> None:
        """An immediate shutdown: no checkpoint, the next start replays the WAL (as after a crash)."""
        self._run("-m", "immediate", "-w", "stop")

    def start(self) -> None:
        self._run("-l", str(self.data.parent / "server.log"), "-w", "-t", "120", "start")
