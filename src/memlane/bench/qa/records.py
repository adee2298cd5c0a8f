"""What one answering or judging call leaves behind: its usage, or a failure record instead of a score."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from memlane.core.errors import LLMError, LLMResponseError
from memlane.core.llm import CallUsage as CallUsage  # the usage part of an LLMResult, as the records keep it


@dataclass(frozen=True, slots=True)
class Failure:
    """A call that produced no usable reply once the client's retries were spent.

    It stands in for the answer or the verdict, so a failed sample is counted as failed in every report
    rather than scored 0. ``stage`` is ``answer`` or ``judge``; ``error`` the exception class; ``raw`` the
    last unusable reply, when there was one.
    """

    stage: str
    error: str
    message: str
    model: str
    prompt_id: str
    prompt_sha256: str
    raw: str | None = None

    @classmethod
    def of(cls, stage: str, exc: LLMError, *, model: str, prompt_id: str, prompt_sha256: str) -> Failure:
        """The record of ``exc`` raised by an LLM call."""
        raw = exc.raw if isinstance(exc, LLMResponseError) else None
        return cls(stage, type(exc).__name__, str(exc), model, prompt_id, prompt_sha256, raw)

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above."""
        return asdict(self)
