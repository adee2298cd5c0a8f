"""Slow clients against a real `memlane serve` (real sockets, uvicorn): a body sent a byte at a time, and
headers sent a byte at a time, end in a 408 and a closed connection after --read-timeout; other clients
are served meanwhile. Bounded: every socket has a timeout, the whole test takes a few seconds."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from redteam_support import ADMIN_KEY, Served, served

READ_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Served:
    folder: Path = tmp_path_factory.mktemp("slow")
    env = {"MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": str(folder / "slow.db")}
    args = ["serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0", "--read-timeout", str(READ_TIMEOUT_S)]
    with served(args, env) as srv:
        yield srv


def trickle(port: int, head: bytes, body: bytes, pace_s: float = 0.2, budget_s: float = 10.0) -> tuple[bytes, float]:
    """Send ``head`` at once, then ``body`` one byte every ``pace_s`` until the server answers or closes;
    returns all it sent back and when it began to (seconds after connecting)."""
    start = time.monotonic()
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=budget_s) as sock:
        if head:
            sock.sendall(head)
        sock.settimeout(pace_s)
        for i in range(len(body)):
            try:
                sock.sendall(body[i : i + 1])
                answer = sock.recv(65536)
            except TimeoutError:
                continue  # no answer yet: the next byte
            except OSError:
                pass  # closed by the server
            break
        took = time.monotonic() - start
        sock.settimeout(max(0.1, budget_s - took))
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer, took


def test_a_body_sent_a_byte_a_time_ends_in_408(server: Served) -> None:
    body = b'{"messages": [{"role": "user", "content": "' + b"x" * 200 + b'"}]}'
    head = (
        b"POST /v1/memories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + ADMIN_KEY.encode() + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    answer, took = trickle(server.port, head, body)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"request_timeout" in answer and b"connection: close" in answer.lower()
    assert READ_TIMEOUT_S * 0.9 <= took < READ_TIMEOUT_S + 3, took


def test_headers_sent_a_byte_a_time_end_in_408(server: Served) -> None:
    head = b"GET /v1/users HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 100
    answer, took = trickle(server.port, b"", head)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"headers" in answer and READ_TIMEOUT_S * 0.9 <= took < READ_TIMEOUT_S + 3, took


def test_an_idle_connection_is_closed(server: Served) -> None:
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        assert sock.recv(100) == b""  # closed by the server, with nothing sent either way
    assert time.monotonic() - start < READ_TIMEOUT_S + 3


def test_others_are_served_while_slow_clients_trickle(server: Served) -> None:
    slow = [
        threading.Thread(target=trickle, args=(server.port, b"POST /v1/search HTTP/1.1\r\n", b"Host: x\r\n" * 20))
        for _ in range(8)
    ]
    for t in slow:
        t.start()
    try:
        start = time.monotonic()
        resp = httpx.get(f"{server.base}/healthz", timeout=10)
        assert resp.status_code == 200 and time.monotonic() - start < 2
    finally:
        for t in slow:
            t.join(timeout=15)
    assert "Traceback" not in server.log()
