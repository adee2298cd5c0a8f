"""The load script's client loop, briefly and in process, so that it keeps working between real runs
(`tests/http/load_http.py --duration 60` against `memlane serve`)."""

from __future__ import annotations

import httpx
from http_support import BASE_URL, Service
from load_http import run_load


def test_the_load_loop_runs_adds_and_searches_without_errors(service: Service) -> None:
    keys = [service.new_user(f"load{i}") for i in range(2)]
    for key in keys:  # (a search before a user's first add breaks the add: see test_http_memories)
        service.client(key).post("/v1/memories", json={"messages": [{"role": "user", "content": "seed"}]})

    def make_client(key: str) -> httpx.Client:
        return httpx.Client(base_url=BASE_URL, transport=service.transport, headers={"Authorization": f"Bearer {key}"})

    stats = run_load(make_client, keys, duration_s=0.5, adders=1, searchers=1)
    assert stats["add"].latencies and stats["search"].latencies
    assert stats["add"].errors == [] and stats["search"].errors == []
    summary = stats["search"].summary(0.5)
    assert summary["p50_ms"] <= summary["p95_ms"] <= summary["p99_ms"] <= summary["max_ms"]
