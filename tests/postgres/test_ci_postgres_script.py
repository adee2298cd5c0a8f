"""`.ci/postgres.sh start` picks a port it can bind: a port held by a client socket (as any outgoing
connection's may be, in the kernel's ephemeral range) is skipped, and the range itself is avoided."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "postgres.sh"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
VECTOR = Path("/usr/share/postgresql/15/extension/vector.control")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (PG_BIN / "initdb").exists() or not VECTOR.exists() or shutil.which("python3") is None,
        reason="needs PostgreSQL 15 with pgvector installed (bash .ci/postgres.sh install) and python3",
    ),
]


def ephemeral_range() -> tuple[int, int]:
    lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(lo), int(hi)


def hold_as_client(port: int, stack: ExitStack) -> bool:
    """Bind 127.0.0.1:``port`` as the local end of an outgoing connection (no SO_REUSEADDR, like most
    clients); False if the port is taken already."""
    server = stack.enter_context(socket.socket())
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = stack.enter_context(socket.socket())
    try:
        client.bind(("127.0.0.1", port))
    except OSError:
        return False
    client.connect(server.getsockname())
    return True


def nothing_listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def held_ports() -> Iterator[tuple[int, int]]:
    """Two ports held by client sockets: the first one a connect probe from 55432 would take, and the first
    one from 15432 that the script is told to start at."""
    with ExitStack() as stack:
        probed = next(p for p in range(55432, 55632) if nothing_listens(p))
        hold_as_client(probed, stack)
        base = next(p for p in range(15432, 16432) if hold_as_client(p, stack))
        yield probed, base


def test_start_skips_ports_it_cannot_bind_and_the_ephemeral_range(held_ports: tuple[int, int]) -> None:
    probed, base = held_ports
    env = {**os.environ, "MEMLANE_PG_PORT_BASE": str(base)}
    res = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300)
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in res.stdout.splitlines() if line.startswith("export ")
    )
    try:
        assert res.returncode == 0, res.stderr
        url = exports["MEMLANE_TEST_POSTGRES_URL"]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        lo, hi = ephemeral_range()
        assert port not in (probed, base) and not lo <= port <= hi
        with psycopg.connect(url, connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        if "MEMLANE_TEST_PG_DIR" in exports:
            subprocess.run(["bash", str(SCRIPT), "stop", exports["MEMLANE_TEST_PG_DIR"]], timeout=120, check=False)
