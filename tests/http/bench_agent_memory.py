"""Side by side: adds and searches through the Agent Memory routes and through memlane's /v1 routes, for the
same work, in one run against one `memlane serve` on loopback.

    .venv/bin/python tests/http/bench_agent_memory.py --rounds 300 --embedder hashing

Starts `memlane serve` (a free port, a store in a temporary folder, no LLM, no workers), makes one user
with a key and a session, seeds ``--seed`` exchanges, then runs ``--rounds`` rounds, each one add and one
search through each API, alternating which goes first. Both add one exchange as one block (``/v1`` with
``perspective: single``) with extraction off; both search the whole user's memory for the top 10 (hybrid),
each with a query of its own drawn the same way (so neither finds the other's in the embedding cache).
Prints p50 and p95 of each and the ratio (Agent Memory / v1) of the p50s as JSON.
Only loopback is targeted; the server is stopped with SIGTERM at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from http_support import ADMIN_KEY, CLI, wait_for_port
from load_http import WORDS

USER = "bench-user"
SESSION = "bench"


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(12))


def timed(call: Callable[[], httpx.Response], expect: int, into: list[float]) -> None:
    start = time.perf_counter()
    resp = call()
    into.append(time.perf_counter() - start)
    if resp.status_code != expect:
        raise SystemExit(f"unexpected {resp.status_code}: {resp.text[:300]}")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3)


def run(base: str, rounds: int, seed: int) -> dict[str, object]:
    rng = random.Random(7)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60) as admin:
        assert admin.post("/users", json={"user_id": USER, "name": "Bench"}).status_code == 201
        assert admin.post(f"/users/{USER}/sessions", json={"session_id": SESSION}).status_code == 201
        key = admin.post(f"/v1/users/{USER}/keys", json={"label": "bench"}).json()["key"]
    times: dict[str, list[float]] = {"v1_add": [], "am_add": [], "v1_search": [], "am_search": []}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        mem = f"/users/{USER}/sessions/{SESSION}/memory"

        def v1_add() -> httpx.Response:
            turn = [{"role": "user", "content": text(rng)}, {"role": "assistant", "content": text(rng)}]
            body = {"messages": turn, "session_id": SESSION, "perspective": "single", "extract": "off"}
            return client.post("/v1/memories", json=body)

        def am_add() -> httpx.Response:
            body = {
                "messages": [{"user_content": text(rng), "assistant_content": text(rng)}],
                "context_required": False,
            }
            return client.post(mem, json=body)

        for _ in range(seed):
            am_add() if rng.random() < 0.5 else v1_add()
        for i in range(rounds):
            # One query each, of the same kind: a query both searched would be embedded by the first and
            # found in the embedding cache by the second, which would measure the cache, not the routes.
            queries = [" ".join(rng.choice(WORDS) for _ in range(4)) + f" {i} {n}" for n in range(2)]

            def v1_search(q: str = queries[0]) -> httpx.Response:
                return client.post("/v1/search", json={"query": q, "k": 10})

            def am_search(q: str = queries[1]) -> httpx.Response:
                return client.post(
                    mem + "/search", json={"query": q, "filters": {"session_ids": "all", "relevant_k": 10}}
                )

            pairs = [("v1", v1_add, v1_search, 201), ("am", am_add, am_search, 201)]
            for name, add, search, status in pairs if i % 2 == 0 else reversed(pairs):
                timed(add, status, times[f"{name}_add"])
                timed(search, 200, times[f"{name}_search"])
    out: dict[str, object] = {
        name: {"p50_ms": percentile(v, 0.5), "p95_ms": percentile(v, 0.95)} for name, v in times.items()
    }
    for op in ("add", "search"):
        out[f"{op}_p50_ratio"] = round(statistics.median(times[f"am_{op}"]) / statistics.median(times[f"v1_{op}"]), 3)
    out["rounds"] = rounds
    out["seeded_blocks"] = seed
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=500, help="exchanges stored before the measured rounds")
    parser.add_argument("--embedder", default="hashing", help="hashing (no model) or minilm")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
        env.update(
            {
                "MEMLANE_ADMIN_KEY": ADMIN_KEY,
                "MEMLANE_STORE": str(Path(tmp) / "bench.db"),
                "MEMLANE_EMBEDDER": args.embedder,
                "MEMLANE_ACCESS_LOG": "false",
            }
        )
        cmd = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0"]
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        lines: list[str] = []
        try:
            base = f"http://127.0.0.1:{wait_for_port(proc, lines)}"
            print(json.dumps(run(base, args.rounds, args.seed), indent=2))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
