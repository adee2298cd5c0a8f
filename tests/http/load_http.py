"""Load test of the HTTP service: concurrent add and search clients against `memlane serve` on loopback.

    .venv/bin/python tests/http/load_http.py --duration 60 --embedder minilm

Starts `memlane serve` on 127.0.0.1 (a free port, a store in a temporary folder, no extraction workers),
seeds a few users, then runs ``--adders`` add clients and ``--searchers`` search clients for
``--duration`` seconds and prints per-operation p50/p95/p99 latencies, throughput and every error. Only
loopback is targeted; the run stops by itself (duration, then the server is stopped with SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from http_support import ADMIN_KEY, CLI, wait_for_port

WORDS = [
    "sister", "brother", "Lisbon", "Ghent", "cello", "violin", "bike", "garden", "coffee", "tea", "dog",
    "cat", "trip", "Japan", "Kenya", "novel", "painting", "marathon", "recipe", "birthday", "wedding",
    "concert", "museum", "river", "mountain", "beach", "camera", "guitar", "chess", "puzzle",
]  # fmt: skip


@dataclass
class Stats:
    """Latencies (seconds) and errors of one kind of request."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, seconds: float, error: str | None) -> None:
        with self.lock:
            self.latencies.append(seconds)
            if error:
                self.errors.append(error)

    def summary(self, duration_s: float) -> dict[str, float | int]:
        lat = sorted(self.latencies)

        def pct(p: float) -> float:
            return round(1000 * lat[min(len(lat) - 1, int(p * len(lat)))], 2) if lat else 0.0

        return {
            "requests": len(lat),
            "per_s": round(len(lat) / duration_s, 1),
            "p50_ms": pct(0.50),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "max_ms": round(1000 * lat[-1], 2) if lat else 0.0,
            "errors": len(self.errors),
        }


def sentence(rng: random.Random) -> str:
    return f"My {rng.choice(WORDS)} and the {rng.choice(WORDS)} in {rng.choice(WORDS)} on day {rng.randrange(1000)}."


def add_once(client: httpx.Client, rng: random.Random) -> httpx.Response:
    body = {
        "messages": [
            {"role": "user", "content": sentence(rng)},
            {"role": "assistant", "content": f"Nice, tell me more about the {rng.choice(WORDS)}."},
        ],
        "session_id": f"s{rng.randrange(20)}",
    }
    return client.post("/v1/memories", json=body)


def search_once(client: httpx.Client, rng: random.Random) -> httpx.Response:
    query = f"what about my {rng.choice(WORDS)} and {rng.choice(WORDS)}?"
    return client.post("/v1/search", json={"query": query, "k": 10, "mode": "hybrid"})


def run_load(
    make_client: Callable[[str], httpx.Client],
    keys: list[str],
    *,
    duration_s: float,
    adders: int,
    searchers: int,
    seed: int = 7,
) -> dict[str, Stats]:
    """``adders`` + ``searchers`` threads, each with its own client, until ``duration_s`` has passed."""
    stats = {"add": Stats(), "search": Stats()}
    deadline = time.monotonic() + duration_s

    def worker(kind: str, n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        clients = {k: make_client(k) for k in keys}
        call = add_once if kind == "add" else search_once
        try:
            while time.monotonic() < deadline:
                client = clients[rng.choice(keys)]
                start = time.perf_counter()
                try:
                    resp = call(client, rng)
                    error = None if resp.is_success else f"HTTP {resp.status_code}: {resp.text[:200]}"
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                stats[kind].record(time.perf_counter() - start, error)
        finally:
            for c in clients.values():
                c.close()

    threads = [threading.Thread(target=worker, args=("add", i)) for i in range(adders)]
    threads += [threading.Thread(target=worker, args=("search", i)) for i in range(searchers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stats


def seed_users(base: str, users: int, per_user: int) -> list[str]:
    keys: list[str] = []
    rng = random.Random(1)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60) as admin:
        for i in range(users):
            admin.post("/v1/users", json={"user": f"load{i}"}).raise_for_status()
            key = admin.post(f"/v1/users/load{i}/keys", json={}).json()["key"]
            keys.append(key)
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
                for _ in range(per_user):
                    add_once(c, rng).raise_for_status()
    return keys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    ap.add_argument("--adders", type=int, default=4)
    ap.add_argument("--searchers", type=int, default=4)
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--seed-per-user", type=int, default=50, help="adds per user before the load")
    ap.add_argument("--embedder", default="minilm", help="minilm (the real model) or hashing")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "MEMLANE_ADMIN_KEY": ADMIN_KEY,
            "MEMLANE_STORE": str(Path(tmp) / "load.db"),
            "MEMLANE_EMBEDDER": args.embedder,
        }
        cmd = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0"]
        cmd += ["--no-access-log"]
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        lines: list[str] = []
        try:
            port = wait_for_port(proc, lines, timeout_s=120)
            base = f"http://127.0.0.1:{port}"
            keys = seed_users(base, args.users, args.seed_per_user)

            def make_client(key: str) -> httpx.Client:
                return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)

            started = time.monotonic()
            stats = run_load(make_client, keys, duration_s=args.duration, adders=args.adders, searchers=args.searchers)
            elapsed = time.monotonic() - started
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    report = {
        "embedder": args.embedder,
        "duration_s": round(elapsed, 1),
        "clients": {"add": args.adders, "search": args.searchers},
        "users": args.users,
        **{kind: s.summary(elapsed) for kind, s in stats.items()},
    }
    print(json.dumps(report, indent=2))
    for kind, s in stats.items():
        for e in s.errors[:10]:
            print(f"{kind} error: {e}", file=sys.stderr)
    return 0 if not any(s.errors for s in stats.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
