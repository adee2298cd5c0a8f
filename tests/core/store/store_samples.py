"""What several store tests write: chat turns, an extraction reply, a user's sample exchanges, a queue drained by
hand. Imported by name (this folder is on the import path: conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from memlane.core.llm import ChatMessage
from memlane.core.memory import Memory

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def chat(*lines: str) -> list[dict[str, str]]:
    """Turns that alternate user, assistant, starting with the user."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(lines)]


def reply(messages: Sequence[ChatMessage]) -> str:
    """An extraction LLM's answer: a summary and one fact, both naming the text they came from."""
    text = messages[-1]["content"]
    return json.dumps({"summary": f"Summary of {text[:40]}", "facts": [f"Fact from {text[:40]}"]})


def add_sample(mem: Memory, user: str, topic: str, n: int = 3, start: datetime = T0) -> list[str]:
    """``n`` exchanges of ``user`` about ``topic``, one a day from ``start``, each in its own session."""
    ids: list[str] = []
    for i in range(n):
        res = mem.add(
            user,
            chat(f"{user} talks about {topic} number {i}", f"reply about {topic} {i}"),
            session_id=f"s{i}",
            time=start + timedelta(days=i),
        )
        ids.extend(res.block_ids)
    return ids


def drain(mem: Memory) -> None:
    """Run every queued extraction job once, in this thread."""
    jobs = mem.queue.claim("t", 100, 60.0)
    for job in jobs:
        result = mem.extractor().extract(job.block)
        vectors = mem.embedder.embed([result.summary, *result.facts])
        mem.queue.complete(job, result, vectors)
