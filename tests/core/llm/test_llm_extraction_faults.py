"""The real client through the queue against a faulty server: no block lost, every job ends done or dead."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from fakeserver import FAKE_API_KEY, FAKE_MODEL, FakeChatServer, Reply

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import CallLog, LLMSettings, OpenAIChatClient
from memlane.core.memory import AddRequest, Memory
from memlane.core.model import ExtractionStatus
from memlane.core.store.sqlite import SqliteStore


def extraction_content(body: dict[str, Any]) -> str:
    exchange = body["messages"][1]["content"]  # after the instructions; re-asks come later
    first = exchange.splitlines()[0]
    return json.dumps({"summary": f"About {first}", "facts": [first]})


class FaultyServer(FakeChatServer):
    """Injects 429 (Retry-After), 500, slow replies past the client's timeout and invalid JSON."""

    def __init__(self, rate: float, seed: int = 11) -> None:
        super().__init__()
        self.rate = rate
        self.rng = random.Random(seed)
        self.faults: dict[str, int] = {"429": 0, "500": 0, "timeout": 0, "invalid_json": 0}
        self.responder = extraction_content

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[Reply, dict[str, Any]]:
        reply, body = super().handle(path, headers, raw)
        with self._lock:
            roll = self.rng.random()
            if roll >= self.rate:
                return reply, body
            kind = self.rng.choice(list(self.faults))
            self.faults[kind] += 1
        if kind == "429":
            return Reply(status=429, headers={"Retry-After": "1"}), body
        if kind == "500":
            return Reply(status=500), body
        if kind == "timeout":
            return Reply(content=reply.content, delay_s=0.6), body
        return Reply(content='{"summary": "cut off'), body


def client(
    server: FakeChatServer, log: CallLog | None, sleeps: list[float], timeout_s: float = 0.3
) -> OpenAIChatClient:
    settings = LLMSettings(
        model=FAKE_MODEL,
        api_key=FAKE_API_KEY,
        base_url=server.url,
        timeout_s=timeout_s,
        max_retries=2,
        max_parse_retries=1,
        max_concurrency=4,
    )
    return OpenAIChatClient(settings, call_log=log, sleep=sleeps.append, rng=random.Random(3))


def requests_for(n: int) -> list[AddRequest]:
    return [
        AddRequest(
            "alice" if i % 2 else "bob",
            [
                {"role": "user", "content": f"exchange number {i} about topic {i % 7}"},
                {"role": "assistant", "content": "noted"},
            ],
            session_id=f"s{i}",
            perspective="single",
        )
        for i in range(n)
    ]


def test_faults_at_15_percent_lose_no_block_and_every_job_ends(tmp_path: Path) -> None:
    n = 240
    sleeps: list[float] = []
    with FaultyServer(rate=0.15) as server:
        mem = Memory(
            SqliteStore(tmp_path / "f.db"), HashingEmbedder(), llm=client(server, None, sleeps), max_attempts=4
        )
        mem.add_many(requests_for(n), extract="async")
        stats = mem.worker(concurrency=4, lease_s=30, poll_s=0.01, retry_in=lambda _a: 0.0).run(drain=True)
        faults = dict(server.faults)
    assert sum(faults.values()) >= 0.1 * n and all(v > 0 for v in faults.values()), faults
    st = mem.queue_status(recent_errors=100)
    assert st.queued == st.running == 0
    assert st.done + st.dead == n and stats.done == st.done and stats.dead == st.dead
    assert st.done >= n - 5  # with 4 attempts of 3 tries each, a job rarely dies at this rate
    assert 1.0 in sleeps  # Retry-After honoured
    blocks = mem.list("alice", limit=1000) + mem.list("bob", limit=1000)
    assert len(blocks) == n
    for b in blocks:
        assert b.extraction_status in (ExtractionStatus.DONE, ExtractionStatus.FAILED)
        if b.extraction_status is ExtractionStatus.DONE:
            assert b.summary == f"About {b.message.splitlines()[0]}"
    dead_errors = [e for e in st.last_errors if e.status == "dead"]
    assert len(dead_errors) == st.dead and all(e.error for e in dead_errors)


def test_a_second_identical_run_makes_no_request(tmp_path: Path) -> None:
    sleeps: list[float] = []
    log = CallLog(tmp_path / "calls.db")
    with FakeChatServer() as server:
        server.responder = extraction_content
        # A generous timeout: on a busy machine a retried request would be counted twice.
        first = Memory(SqliteStore(tmp_path / "a.db"), HashingEmbedder(), llm=client(server, log, sleeps, 10.0))
        first.add_many(requests_for(20), extract="sync")
        after_first = server.count
        second = Memory(SqliteStore(tmp_path / "b.db"), HashingEmbedder(), llm=client(server, log, sleeps, 10.0))
        second.add_many(requests_for(20), extract="sync")
        assert after_first == 20 and server.count == after_first
    summaries = [b.summary for b in second.list("alice", limit=100)]
    assert summaries == [b.summary for b in first.list("alice", limit=100)] and all(summaries)
    assert log.stats().cache_hits == 20
