"""An LLM outage (connection refused, timeouts, 429, 502-504) never kills queued extraction jobs: a try that
finds the LLM unreachable gives its attempt back and waits with bounded exponential backoff, the worker
pauses its claims, the queue shows the outage, and the jobs run once the LLM is back. A bad reply, a 500
or a refusal of the request itself still uses up attempts (test_llm_block_failures.py: whose failure)."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakeserver import FAKE_API_KEY, FAKE_MODEL, FakeChatServer, Reply

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import LLMTransportError, StoreError
from memlane.core.extraction.worker import OUTAGE_CAP_S, Worker, outage_delay, run_job
from memlane.core.jobs import ClaimedJob, JobQueue, JobStatus
from memlane.core.llm import LLMSettings, OpenAIChatClient
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore


def extraction_content(body: dict[str, Any]) -> str:
    first = body["messages"][1]["content"].splitlines()[0]
    return json.dumps({"summary": f"About {first}", "facts": [first]})


class SwitchableServer(FakeChatServer):
    """Answers every request with ``failure`` while it is set (a 503, a 429, a reply too slow to wait for),
    like a server that is down, then normally."""

    def __init__(self) -> None:
        super().__init__()
        self.responder = extraction_content
        self.failure = Reply(status=503)


@pytest.fixture
def server() -> Iterator[SwitchableServer]:
    with SwitchableServer() as s:
        yield s


def client(base_url: str, timeout_s: float = 2.0) -> OpenAIChatClient:
    settings = LLMSettings(
        model=FAKE_MODEL, api_key=FAKE_API_KEY, base_url=base_url, timeout_s=timeout_s, max_retries=1
    )
    return OpenAIChatClient(settings, sleep=lambda _s: None, rng=random.Random(5))


def dead_url() -> str:
    """A loopback port nothing listens on: connection refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def memory(tmp_path: Path, llm: OpenAIChatClient, jobs: int = 3) -> Memory:
    mem = Memory(SqliteStore(tmp_path / "m.db"), HashingEmbedder(), llm=llm, max_attempts=2)
    for i in range(jobs):
        chat = [{"role": "user", "content": f"exchange {i}"}, {"role": "assistant", "content": "ok"}]
        mem.add("alice", chat, extract="async", perspective="single")
    return mem


def worker(mem: Memory, **kw: Any) -> Worker:
    """A worker that waits no time between tries, so a test sees many tries fast."""
    options: dict[str, Any] = {"outage_in": lambda _n: 0.0, "pause_in": lambda _n: 0.0, "retry_in": lambda _a: 0.0}
    return Worker(mem.queue, mem.extractor(), mem.embedder, concurrency=2, poll_s=0.01, **(options | kw))


def attempts(mem: Memory) -> list[tuple[str, int, int]]:
    assert isinstance(mem.store, SqliteStore)
    return [(str(s), int(a), int(f)) for s, a, f in mem.store.query("SELECT status, attempts, llm_failures FROM jobs")]


def test_an_outage_longer_than_every_attempt_kills_no_job(server: SwitchableServer, tmp_path: Path) -> None:
    mem = memory(tmp_path, client(server.url))
    try:
        for _ in range(6):  # three tries per job: more than its 2 attempts
            stats = worker(mem).run(drain=True)
            assert stats.llm_unreachable and stats.dead == 0 and stats.retried == 0
        assert {(s, a) for s, a, _ in attempts(mem)} == {("queued", 0)}
        assert all(f >= 2 for _, _, f in attempts(mem))
        st = mem.queue_status()
        assert (st.queued, st.dead) == (3, 0)
        assert st.llm_outage is not None and st.llm_outage.jobs == 3 and "HTTP 503" in st.llm_outage.last_error

        server.failure = None  # the LLM is back
        stats = worker(mem).run(drain=True)
        assert (stats.done, stats.dead, stats.llm_unreachable) == (3, 0, False)
        assert {(s, a, f) for s, a, f in attempts(mem)} == {("done", 1, 0)}
        assert mem.queue_status().llm_outage is None
    finally:
        mem.close()


@pytest.mark.parametrize(
    "failure",
    [Reply(status=503), Reply(status=429, headers={"Retry-After": "0"}), Reply(status=502), Reply(delay_s=0.5)],
    ids=["503", "429", "502", "timeout"],
)
def test_each_kind_of_outage_gives_the_attempt_back(server: SwitchableServer, tmp_path: Path, failure: Reply) -> None:
    server.failure = failure
    mem = memory(tmp_path, client(server.url, timeout_s=0.2), jobs=1)
    try:
        job = mem.queue.claim("w", 1, 60.0)[0]
        waits: list[int] = []
        status = run_job(job, mem.queue, mem.extractor(), mem.embedder, outage_in=lambda n: waits.append(n) or 30.0)
        assert status is JobStatus.QUEUED and waits == [1]
        assert attempts(mem) == [("queued", 0, 1)]
        outage = mem.queue_status().llm_outage
        assert outage is not None and 20 < outage.next_try_in_s <= 30
    finally:
        mem.close()


def test_connection_refused_is_an_outage(tmp_path: Path) -> None:
    mem = memory(tmp_path, client(dead_url()), jobs=1)
    try:
        stats = worker(mem).run(drain=True)
        assert stats.llm_unreachable and stats.waited == 1
        assert attempts(mem) == [("queued", 0, 1)]
    finally:
        mem.close()


@pytest.mark.parametrize("status", [400, 500])
def test_a_refusal_or_a_failure_of_the_request_and_a_bad_reply_use_attempts(
    server: SwitchableServer, tmp_path: Path, status: int
) -> None:
    server.failure = Reply(status=status, body='{"error": "context length exceeded"}')
    mem = memory(tmp_path, client(server.url), jobs=1)
    try:
        stats = worker(mem).run(drain=True)
        assert (stats.dead, stats.retried, stats.llm_unreachable) == (1, 1, False)
        assert attempts(mem) == [("dead", 2, 0)]
        server.failure = Reply(content="not json at all")
        assert mem.requeue().dead == 1
        stats = worker(mem).run(drain=True)
        assert stats.dead == 1 and attempts(mem) == [("dead", 2, 0)]
    finally:
        mem.close()


def test_the_worker_pauses_its_claims_while_the_llm_is_unreachable(server: SwitchableServer, tmp_path: Path) -> None:
    mem = memory(tmp_path, client(server.url), jobs=6)
    try:
        w = worker(mem, pause_in=lambda _n: 30.0)
        thread = threading.Thread(target=w.run)
        thread.start()
        deadline = time.monotonic() + 10
        while w.stats.waited < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        tried = len(server.requests)
        time.sleep(0.5)  # jobs are ready (their own backoff is 0 s), but the worker waits out its pause
        assert len(server.requests) == tried
        w.stop()
        thread.join()
        assert w.stats.waited == 2 and tried == 2 * 2  # two jobs, each tried twice by the client
    finally:
        mem.close()


def test_outage_backoff_grows_to_a_bound_with_jitter() -> None:
    rng = random.Random(1)
    for failures in range(1, 40):
        cap = min(OUTAGE_CAP_S, 10.0 * 2 ** (failures - 1))
        delays = {outage_delay(failures, rng) for _ in range(20)}
        assert all(cap / 2 <= d <= cap for d in delays) and len(delays) > 1
    assert outage_delay(1000, rng) <= OUTAGE_CAP_S


class RefusingQueue:
    """A queue whose store refuses the first ``n`` claims (a full disk, a database that is down)."""

    def __init__(self, inner: JobQueue, n: int) -> None:
        self.inner, self.left = inner, n

    def claim(self, owner: str, n: int, lease_s: float, *, job_ids: Sequence[int] | None = None) -> list[ClaimedJob]:
        if self.left:
            self.left -= 1
            raise StoreError("claim failed: database or disk is full", reason="disk full")
        return self.inner.claim(owner, n, lease_s, job_ids=job_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_claim_the_store_refuses_is_tried_again(server: SwitchableServer, tmp_path: Path) -> None:
    server.failure = None
    mem = memory(tmp_path, client(server.url), jobs=2)
    try:
        queue = RefusingQueue(mem.queue, 3)
        w = Worker(queue, mem.extractor(), mem.embedder, poll_s=0.01)  # type: ignore[arg-type]
        stats = w.run(drain=True)
        assert (stats.done, stats.claims_refused) == (2, 3)
    finally:
        mem.close()


def test_sync_extraction_leaves_the_job_waiting_with_its_attempt(tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "s.db"), HashingEmbedder(), llm=client(dead_url()), max_attempts=1)
    try:
        res = mem.add("alice", [{"role": "user", "content": "hello"}], extract="sync", perspective="single")
        assert (res.jobs_enqueued, res.jobs_done, res.jobs_failed) == (1, 0, 0)
        assert attempts(mem) == [("queued", 0, 1)]  # one attempt allowed, none used
    finally:
        mem.close()


def test_a_transport_error_says_whether_it_is_an_outage() -> None:
    assert LLMTransportError("down").outage
    assert not LLMTransportError("HTTP 400", outage=False).outage


ASK = [{"role": "system", "content": "Extract."}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("failure", "outage", "could_be_the_request"),
    [
        (Reply(status=500), False, False),  # the server failed on this request
        (Reply(status=429, headers={"Retry-After": "0"}), True, True),
        (Reply(status=503), True, True),
        (Reply(delay_s=0.5), True, True),  # no reply in time: the request reached the server
        (Reply(status=401), True, False),  # the key, the model or the route: the service's
    ],
    ids=["500", "429", "503", "timeout", "401"],
)
def test_a_transport_error_says_whose_it_could_be(
    server: SwitchableServer, failure: Reply, outage: bool, could_be_the_request: bool
) -> None:
    server.failure = failure
    with pytest.raises(LLMTransportError) as raised:
        client(server.url, timeout_s=0.2).complete_json(ASK)
    assert (raised.value.outage, raised.value.could_be_the_request) == (outage, could_be_the_request)


def test_a_connection_refused_cannot_be_the_requests() -> None:
    with pytest.raises(LLMTransportError) as raised:
        client(dead_url()).complete_json(ASK)
    assert raised.value.outage and not raised.value.could_be_the_request
