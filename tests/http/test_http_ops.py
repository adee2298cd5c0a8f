"""Operations: /healthz probes the store, the embedder and the queue; /metrics is Prometheus text with
route templates (never user names or ids) as labels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from http_support import ADMIN_KEY, Service, chat, make_service

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import EmbedderError


def test_health_reports_each_component(service: Service) -> None:
    service.client(service.new_user("alice")).post("/v1/memories", json={"messages": chat("x"), "extract": "async"})
    resp = service.client().get("/healthz")
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "ok" and body["store"]["ok"] and body["embedder"]["ok"]
    assert body["embedder"]["detail"]["dim"] == 64 and body["queue"]["detail"]["queued"] == 2


class BrokenEmbedder(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderError("model file missing")


def test_health_is_503_when_a_component_fails(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    try:
        service.memory.embedder.inner = BrokenEmbedder()
        resp = service.client().get("/healthz")
        assert resp.status_code == 503
        body = resp.json()
        assert body["status"] == "unhealthy"
        # The exception's text stays in the server log; the body has a general reason and the request id.
        rid = resp.headers["X-Request-ID"]
        assert body["embedder"] == {"ok": False, "detail": {"reason": "embedder unavailable", "request_id": rid}}
        assert "model file missing" not in resp.text
        assert body["store"]["ok"] and body["store"]["detail"]["writable"]
    finally:
        service.close()


def test_metrics_count_requests_by_route_template(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    block = alice.post("/v1/memories", json={"messages": chat("hello")}).json()["block_ids"][0]
    alice.get(f"/v1/memories/{block}")
    alice.get("/v1/memories/nope")
    service.client().get("/v1/memories")
    text = service.client(ADMIN_KEY).get("/metrics").text
    assert 'memlane_http_requests_total{method="GET",route="/v1/memories/{block_id}",status="200"} 1.0' in text
    assert 'memlane_http_requests_total{method="GET",route="/v1/memories/{block_id}",status="404"} 1.0' in text
    assert 'memlane_http_requests_total{method="GET",route="/v1/memories",status="401"} 1.0' in text
    assert 'memlane_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/v1/memories"}' in text
    assert 'memlane_queue_jobs{status="queued"} 0.0' in text and "memlane_http_requests_in_flight" in text
    assert block not in text and "alice" not in text and "nope" not in text
    assert service.client().get("/metrics").status_code == 401
