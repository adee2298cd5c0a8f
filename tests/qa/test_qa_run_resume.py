"""An interrupted QA run resumes from its log and re-sends no completed call: requests counted at a real
(in-process) OpenAI-compatible server, with the OpenAI client and its call log (the response cache)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qa_run_support import LOCOMO_REPLIES, answer_text, fakeserver, judge_text, lines, make_data_dir, qa_options

from memlane.bench.qa.qalog import AnswerRecord
from memlane.bench.qa.run import run_qa
from memlane.core.llm import CallLog, LLMSettings, OpenAIChatClient

FakeChatServer = fakeserver.FakeChatServer
FAKE_API_KEY: str = fakeserver.FAKE_API_KEY
FAKE_MODEL: str = fakeserver.FAKE_MODEL


class Interrupted(Exception):
    """Stands for a crash or Ctrl-C in the middle of a run."""


def responder(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    is_judge = "Generated answer:" in prompt or "Model Response:" in prompt
    return judge_text(prompt) if is_judge else answer_text(prompt, LOCOMO_REPLIES)


@pytest.fixture
def server() -> Iterator[Any]:
    with FakeChatServer() as s:
        s.responder = responder
        s.default_delay_s = 0.01  # keep a few calls in flight at once
        yield s


def client(server: Any, log: CallLog) -> OpenAIChatClient:
    settings = LLMSettings(model=FAKE_MODEL, api_key=FAKE_API_KEY, base_url=server.url, timeout_s=5.0, max_retries=0)
    return OpenAIChatClient(settings, call_log=log, sleep=lambda _: None, rng=random.Random(1))


def sent(server: Any) -> list[str]:
    return [json.dumps(r.body["messages"], sort_keys=True) for r in server.requests]


def run(root: Path, server: Any, out: Path, *, stop_after: int | None = None) -> int:
    """One invocation with a fresh client (as a new process would have) on the shared call log."""
    written = 0

    def count(record: AnswerRecord) -> None:
        nonlocal written
        written += 1
        if stop_after is not None and written >= stop_after:
            raise Interrupted

    with CallLog(root / "calls.db") as log:
        llm = client(server, log)
        try:
            run_qa(qa_options(root, concurrency=3), out, llm=llm, judge_llm=llm, progress=False, on_record=count)
        finally:
            llm.close()
    return written


def test_resume_after_an_interruption_resends_no_completed_call(tmp_path: Path, server: Any) -> None:
    make_data_dir(tmp_path)
    out = tmp_path / "run"
    with pytest.raises(Interrupted):
        run(tmp_path, server, out, stop_after=3)
    first = server.count
    logged = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert sum(1 for r in logged if r["type"] == "answer") == 3
    assert first >= 6  # answer + judge of the 3 logged questions, and whatever was in flight

    # Cut the last record in half, as a crash during the write would.
    text = (out / "log.jsonl").read_text()
    (out / "log.jsonl").write_text(text[: len(text) - 20])

    assert run(tmp_path, server, out) == 7  # 9 questions, 2 already logged complete
    # Every distinct call went to the server exactly once across both invocations: 9 answers + 9 verdicts.
    bodies = sent(server)
    assert len(bodies) == len(set(bodies)) == 18
    answers = lines(out / "answers.jsonl")
    assert [a["qa_id"] for a in answers] == [f"conv-a:{i}" for i in range(8)] + ["conv-b:0"]
    assert not any(a["failed"] for a in answers)
    results = json.loads((out / "results.json").read_text())
    assert results["segments"] == 2
    stages = {s["stage"]: s for s in results["aggregates"]["stages"]}
    assert stages["answer"]["tokens_in"] == 9 * 11  # the fake server's usage, one call per question

    # A third invocation finds everything logged and sends nothing.
    assert run(tmp_path, server, out) == 0
    assert server.count == 18


def test_rescoring_a_new_run_folder_is_served_from_the_call_cache(tmp_path: Path, server: Any) -> None:
    make_data_dir(tmp_path)
    run(tmp_path, server, tmp_path / "a")
    assert server.count == 18
    run(tmp_path, server, tmp_path / "b")  # same settings, another folder: every call is a cache hit
    assert server.count == 18
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    stages = {s["stage"]: s for s in results["aggregates"]["stages"]}
    assert stages["answer"]["cached_calls"] == stages["answer"]["calls"] == 9
    assert results["aggregates"]["overall"]["j"]["mean"] == pytest.approx(4 / 7)
