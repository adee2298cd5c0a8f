"""An add with ``async_processing: false`` answers within the server's bound (``agent_sync_timeout_s``), the
LLM client's retries and waits included, against a real in-process OpenAI-compatible server: 201 with the
blocks extracted, or 502 ``UPSTREAM_ERROR`` when the LLM cannot be reached, answers garbage or is too slow,
the blocks stored and searchable, each left ``processing`` (queued for a worker) or ``extraction_failed``, as
the message says."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from agent_memory_support import AgentApi, flat_error
from http_support import ADMIN_KEY, TEST_HOSTS, fakeserver
from sync_asgi import SyncASGITransport

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import LLMSettings, OpenAIChatClient
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.http import create_app
from memlane.interfaces.http.settings import HttpSettings

BOUND_S = 2.0
SLACK_S = 1.5  # the add's own work, and the scheduling of a loaded machine
ADD = "/users/alice/sessions/s1/memory"


def make(tmp_path: Path, base_url: str) -> AgentApi:
    """The routes over SQLite, with memlane's LLM client as configured by default (60 s per attempt, 4
    retries with backoff, 2 re-asks of a bad reply), a bound of BOUND_S and 3 attempts per block."""
    settings = LLMSettings(model=fakeserver.FAKE_MODEL, api_key=fakeserver.FAKE_API_KEY, base_url=base_url)
    memory = Memory(
        SqliteStore(tmp_path / "sync.db"), HashingEmbedder(), llm=OpenAIChatClient(settings), max_attempts=3
    )
    app = create_app(
        memory, admin_key=ADMIN_KEY, settings=HttpSettings(allowed_hosts=TEST_HOSTS, agent_sync_timeout_s=BOUND_S)
    )
    made = AgentApi(app, memory, SyncASGITransport(app))
    made.session("alice", "s1")
    return made


def add(made: AgentApi, *facts: str) -> tuple[Any, float]:
    """An add of ``facts`` that waits for its extraction; the answer and how long it took."""
    started = time.monotonic()
    resp = made.admin.post(ADD, json={"facts": list(facts), "async_processing": False})
    return resp, time.monotonic() - started


def statuses(made: AgentApi) -> dict[str, str]:
    listed = made.admin.get("/users/alice/memory").json()["memory_blocks"]
    return {b["block_id"]: b["status"] for b in listed}


def test_an_extraction_that_finishes_is_201_ready(tmp_path: Path, fake_llm: Any) -> None:
    made = make(tmp_path, fake_llm.url)
    try:
        resp, _ = add(made, "likes tea")
        assert resp.status_code == 201, resp.text
        block = made.admin.get("/users/alice/memory").json()["memory_blocks"][0]
        assert block["status"] == "ready" and block["summary"] and block["contexts"]
    finally:
        made.close()


def test_an_llm_that_cannot_be_reached_is_502_within_the_bound(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    made = make(tmp_path, f"http://127.0.0.1:{port}/v1")
    try:
        resp, took = add(made, "likes tea", "lives in Lisbon")
        err = flat_error(resp, 502, "UPSTREAM_ERROR")
        assert took < BOUND_S + SLACK_S, took
        ids = err["details"]["block_ids"]
        assert err["details"]["service"] == "llm" and err["details"]["processing"] == ids and len(ids) == 2
        assert "stored and searchable" in err["message"] and "do not add again" in err["message"]
        assert all(i in err["message"] for i in ids) and "127.0.0.1" not in err["message"], err["message"]
        assert statuses(made) == dict.fromkeys(ids, "processing")  # what was written stays written
        assert made.memory.queue_status().queued == 2  # queued for a worker, no attempt used
    finally:
        made.close()


def test_a_slow_llm_is_502_within_the_bound_and_extracted_later(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.default_delay_s = 30.0  # far over the bound, far under the client's 60 s per attempt
    made = make(tmp_path, fake_llm.url)
    try:
        resp, took = add(made, "likes tea")
        err = flat_error(resp, 502, "UPSTREAM_ERROR")
        assert took < BOUND_S + SLACK_S, took
        assert err["details"]["processing"] == err["details"]["block_ids"]
        fake_llm.default_delay_s = 0.0
        made.memory.worker(concurrency=1, poll_s=0.01).run(drain=True)  # what memlane serve's workers do
        assert set(statuses(made).values()) == {"ready"}
    finally:
        made.close()


def test_garbage_replies_are_502_within_the_bound(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.responder = None
    fake_llm.default_content = "this is not JSON at all"
    made = make(tmp_path, fake_llm.url)
    try:
        resp, took = add(made, "likes tea")
        err = flat_error(resp, 502, "UPSTREAM_ERROR")
        assert took < BOUND_S + SLACK_S, took
        assert "not valid JSON" in err["message"]
        (block_id,) = err["details"]["block_ids"]
        state = statuses(made)[block_id]
        # Within the bound its attempts are spent (extraction_failed) or it is queued for a worker with the
        # attempts it has left (processing): the answer says which.
        assert err["details"][state] == [block_id], err
        if state == "extraction_failed":
            assert "an update of one, async_processing true, extracts it again" in err["message"]
    finally:
        made.close()
