"""The six health routes in that API's shapes, reporting what memlane knows honestly: /health is public and
cheap; the models route says the LLM is not configured (never healthy) on a server without one; the queue
is mapped onto the batch processor's shape; memlane has no memory monitor (not_initialized)."""

from __future__ import annotations

from pathlib import Path

from agent_memory_support import AgentApi, flat_error, make_api

import memlane
from memlane.core.llm import ScriptedLLM
from memlane.core.store.sqlite import SqliteStore

BATCH_STATS = {
    "total_enqueued",
    "total_recovered",
    "total_dispatched",
    "total_completed",
    "total_failed",
    "queue_full",
    "queue_duplicates",
    "queue_oversized",
    "recovery_duplicates",
    "active_tasks",
}
RATE_BUDGET = {
    "available_requests",
    "available_tokens",
    "max_requests_per_minute",
    "max_tokens_per_minute",
    "per_request_token_limit",
}


def test_health_is_public_and_says_healthy_with_a_version(sqlite_api: AgentApi) -> None:
    resp = sqlite_api.client().get("/health")
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "healthy" and body["version"] == memlane.__version__
    assert isinstance(body["uptime_seconds"], float) and body["uptime_seconds"] >= 0


def test_a_corrupt_store_makes_health_unhealthy(sqlite_api: AgentApi) -> None:
    sqlite_api.app.state.services.integrity.mark_corrupt("a damaged page")
    resp = sqlite_api.client().get("/health")
    assert resp.status_code == 503 and resp.json()["status"] == "unhealthy"


def test_the_other_health_routes_need_a_key(sqlite_api: AgentApi) -> None:
    for path in (
        "/health/couchbase",
        "/health/models",
        "/health/async-batch-processor",
        "/health/async-batch-processor-stats",
        "/health/memory",
    ):
        flat_error(sqlite_api.client().get(path), 401, "INVALID_TOKEN")
        flat_error(sqlite_api.client("mlk_0123456789ab_nope").get(path), 401, "INVALID_TOKEN")
        assert sqlite_api.admin.get(path).status_code == 200, path


def test_the_database_route_probes_the_store(sqlite_api: AgentApi) -> None:
    body = sqlite_api.admin.get("/health/couchbase").json()
    assert body["status"] == "healthy" and body["service"] == "database" and body["backend"] == "SqliteStore"
    assert body["details"]["writable"] is True


def test_models_say_the_llm_is_not_configured_without_one(sqlite_api: AgentApi) -> None:
    body = sqlite_api.admin.get("/health/models").json()
    assert body["embedding"] == {"status": "healthy", "model": sqlite_api.memory.embedder.model_id}
    assert body["llm"]["status"] == "not_configured" and body["llm"]["status"] != "healthy"
    assert body["status"] == "degraded"  # so a client's health ping does not call the models healthy


def test_models_are_healthy_with_an_llm(llm_api: AgentApi) -> None:
    body = llm_api.admin.get("/health/models").json()
    assert body["status"] == "healthy" and body["llm"]["status"] == "healthy" and body["llm"]["model"]


def test_the_batch_processor_routes_map_the_queue(llm_api: AgentApi) -> None:
    llm_api.memory.add(
        "alice", [{"role": "user", "content": "queued for extraction"}], perspective="single", extract="async"
    )
    plain = llm_api.admin.get("/health/async-batch-processor").json()
    assert plain["status"] == "healthy" and plain["queue"]["size"] == 1 and plain["queue"]["processing"] == 0
    assert plain["queue"]["queued_ids"] == 1  # a count (that API's type): the ids are users' data
    assert plain["queue"]["max_size"] == 10_000
    stats = llm_api.admin.get("/health/async-batch-processor-stats").json()
    assert set(stats["statistics"]) >= BATCH_STATS and set(stats["rate_budget"]) == RATE_BUDGET
    assert stats["statistics"]["total_enqueued"] == 1 and stats["statistics"]["total_completed"] == 0
    assert stats["rate_budget"]["per_request_token_limit"] == 4096
    assert all(isinstance(stats["statistics"][k], int) for k in BATCH_STATS)
    llm_api.memory.worker(concurrency=1).run(drain=True)  # what memlane serve's workers do
    done = llm_api.admin.get("/health/async-batch-processor-stats").json()["statistics"]
    assert done["total_completed"] == 1 and done["total_enqueued"] == 1


def test_the_batch_processor_is_not_initialized_without_an_llm(sqlite_api: AgentApi) -> None:
    body = sqlite_api.admin.get("/health/async-batch-processor").json()
    assert body["status"] == "not_initialized" and "LLM" in body["message"]


def test_memory_monitor_is_not_initialized(sqlite_api: AgentApi) -> None:
    body = sqlite_api.admin.get("/health/memory").json()
    assert body["status"] == "not_initialized" and body["accepting_requests"] is True


def test_the_batch_processor_reports_an_llm_outage(tmp_path: Path) -> None:
    made = make_api(SqliteStore(tmp_path / "outage.db"))
    made.memory.llm = ScriptedLLM(fail_on={1: "transport"})  # the LLM cannot be reached on the first call
    try:
        made.session("alice", "s1")
        made.admin.post("/users/alice/sessions/s1/memory", json={"facts": ["likes tea"]})
        made.memory.worker(concurrency=1).run(drain=True)  # the try finds the LLM unreachable: the job waits
        for path in ("/health/async-batch-processor", "/health/async-batch-processor-stats"):
            body = made.client(made.user_key("alice")).get(path).json()
            assert body["status"] == "degraded" and body["queue"]["size"] == 1, body
            assert "LLM" in body["message"] and "1 block" in body["message"] and "scripted transport" in body["message"]
        assert made.admin.get("/health/models").json()["llm"]["status"] == "unhealthy"
    finally:
        made.close()


def test_the_batch_processor_reports_a_full_queue_and_counts_its_429s(tmp_path: Path) -> None:
    made = make_api(SqliteStore(tmp_path / "full.db"), llm=True, agent_queue_max=2)
    try:
        made.session("alice", "s1")
        add = {"facts": ["one", "two"]}
        assert made.admin.post("/users/alice/sessions/s1/memory", json=add).status_code == 201
        for _ in range(2):
            flat_error(made.admin.post("/users/alice/sessions/s1/memory", json=add), 429, "QUEUE_FULL")
        body = made.admin.get("/health/async-batch-processor-stats").json()
        assert body["status"] == "degraded" and "full" in body["message"] and "2 of 2" in body["message"], body
        assert body["statistics"]["queue_full"] == 2
        made.memory.worker(concurrency=1).run(drain=True)
        body = made.admin.get("/health/async-batch-processor-stats").json()
        assert body["status"] == "healthy" and body["statistics"]["queue_full"] == 2  # counted since the start
    finally:
        made.close()
