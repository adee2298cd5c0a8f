"""The six health routes in that API's shapes, reporting what memlane knows honestly: /health is public and
cheap; the models route says the LLM is not configured (never healthy) on a server without one; the queue
is mapped onto the batch processor's shape; memlane has no memory monitor (not_initialized)."""

from __future__ import annotations

from agent_memory_support import AgentApi, flat_error

import memlane

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
