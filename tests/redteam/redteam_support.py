"""Shared by the red-team tests: the CLI in process, a store's content as a comparable value, and a
`memlane serve` / `memlane mcp` subprocess on a free loopback port."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner, Result

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.cli.app import cli, register_all
from memlane.interfaces.cli.serve_cmds import register as register_serve

register_all()
if "serve" not in cli.commands:
    register_serve(cli)

CLI = (
    "from memlane.interfaces.cli.app import cli, register_all\n"
    "from memlane.interfaces.cli.serve_cmds import register\n"
    "register_all()\n"
    "'serve' in cli.commands or register(cli)\n"
    "cli()\n"
)
STARTED = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
ADMIN_KEY = "redteam-admin-key-0123456789"


def run_cli(args: list[str], env: dict[str, str], stdin: bytes | str | None = None) -> Result:
    return CliRunner().invoke(cli, args, input=stdin, env=env)


def assert_clean_refusal(res: Result, *where: str) -> None:
    """Exit 2, one line on stderr that names ``where``, and no traceback anywhere."""
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for w in where:
        assert w in lines[0], (w, lines[0])
    assert "Traceback" not in res.output


def store_content(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Every user and their block ids: what must not change when input is refused."""
    if not path.exists():
        return []
    mem = Memory(SqliteStore(path), HashingEmbedder())
    try:
        return [(u.name, tuple(b.id for b in mem.list(u.name, limit=10_000))) for u in mem.users()]
    finally:
        mem.close()


@dataclass
class Served:
    proc: subprocess.Popen[str]
    port: int
    lines: list[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return "".join(self.lines)


@contextmanager
def served(args: list[str], env: dict[str, str], timeout_s: float = 30.0) -> Iterator[Served]:
    """``memlane ARGS`` (serve or mcp on port 0) until it says where it listens; stopped with SIGTERM."""
    full_env = {**os.environ, "MEMLANE_EMBEDDER": "hashing", **env}
    cmd = [sys.executable, "-c", CLI, *args]
    proc = subprocess.Popen(cmd, env=full_env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    found: list[int] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if not found and (m := STARTED.search(line)):
                found.append(int(m.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(timeout_s)
    try:
        if not found:
            raise AssertionError("server did not start:\n" + "".join(lines))
        yield Served(proc, found[0], lines)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
