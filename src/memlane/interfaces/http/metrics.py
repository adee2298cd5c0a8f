"""Prometheus metrics: request counts and latencies by route template, and the extraction queue.

Each app has its own registry, so several apps in one process (tests) do not collide. Route labels are
templates (``/v1/memories/{block_id}``), never raw paths: user names and ids would make the label set
unbounded and would leak into whatever scrapes the metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.core.jobs import QueueStatus
from memlane.interfaces.wire.asgi import HttpMiddleware

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNMATCHED = "unmatched"


class QueueCollector(Collector):
    """Reads the queue's counts when scraped (no background polling)."""

    def __init__(self, status: Callable[[], QueueStatus]) -> None:
        self._status = status

    def collect(self) -> Iterator[GaugeMetricFamily]:
        st = self._status()
        jobs = GaugeMetricFamily("memlane_queue_jobs", "Extraction jobs by status.", labels=["status"])
        for name, value in (("queued", st.queued), ("running", st.running), ("done", st.done), ("dead", st.dead)):
            jobs.add_metric([name], value)
        yield jobs
        age = GaugeMetricFamily("memlane_queue_oldest_queued_seconds", "Age of the oldest queued job (0: none).")
        age.add_metric([], st.oldest_queued_age_s or 0.0)
        yield age


class Metrics:
    """The registry and the instruments the middleware feeds."""

    def __init__(self, queue_status: Callable[[], QueueStatus]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "memlane_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memlane_http_request_duration_seconds",
            "HTTP request latency by method and route template.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge("memlane_http_requests_in_flight", "Requests being served.", registry=self.registry)
        self.registry.register(QueueCollector(queue_status))

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MetricsMiddleware(HttpMiddleware):
    """Outermost ASGI middleware: counts every response, 401s and 413s included."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        status = 500  # what the server sends if the app dies before answering
        start = time.perf_counter()

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.metrics.in_flight.dec()
            route = scope.get("route")
            label = str(getattr(route, "path", UNMATCHED))
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(method, label, str(status)).inc()
            self.metrics.latency.labels(method, label).observe(time.perf_counter() - start)
