"""The answerer: one answer-prompt variant, one LLM, one call per question.

The prompt is one user message: the variant's template filled with the rendered context (see
:mod:`memlane.bench.qa.context`), the question date and the question. The answer is the reply with
surrounding white space removed. A call that fails once the client's retries are spent returns a
:class:`~memlane.bench.qa.records.Failure`, never an empty answer.

LoCoMo category 5 as the official scripts ask it: :func:`adversarial_question` turns the question into a
two-option choice (the premise's answer and ``Not mentioned in the conversation``, in a seeded random
order), asked with the ``locomo-adversarial-v1`` prompt; :func:`resolve_choice` maps a one-letter reply back
to the option's text, so the official phrase check can score it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memlane.bench.qa.context import ContextEntry, render_context, render_date
from memlane.bench.qa.prompts import PromptKind, PromptTemplate, get_prompt
from memlane.bench.qa.records import CallUsage, Failure
from memlane.bench.qa.tokens import DEFAULT_COUNTER, TokenCounter
from memlane.core.errors import ConfigError, LLMError
from memlane.core.llm import LLM, ChatMessage

DEFAULT_ANSWER_PROMPT = "locomo-short-answer-v1"
NOT_MENTIONED = "Not mentioned in the conversation"
"""The option the official LoCoMo scripts add to every category-5 question."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer and how it was obtained.

    ``context_tokens`` and ``prompt_tokens`` are estimates by ``counter`` (the rendered context, the whole
    prompt); the billed counts are in ``usage``.
    """

    text: str
    prompt_id: str
    prompt_sha256: str
    context_tokens: int
    prompt_tokens: int
    counter: str
    usage: CallUsage

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above (``usage`` nested)."""
        return {
            "text": self.text,
            "prompt_id": self.prompt_id,
            "prompt_sha256": self.prompt_sha256,
            "context_tokens": self.context_tokens,
            "prompt_tokens": self.prompt_tokens,
            "counter": self.counter,
            "usage": self.usage.to_json(),
        }


class Answerer:
    """Answers questions with ``llm`` and the answer prompt ``prompt`` (an id or a template).

    ``max_tokens`` defaults to the prompt's own limit (the source's, for the verbatim ones). Thread-safe
    when ``llm`` is, so a run may answer several questions at once.
    """

    def __init__(
        self,
        llm: LLM,
        prompt: PromptTemplate | str = DEFAULT_ANSWER_PROMPT,
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        counter: TokenCounter = DEFAULT_COUNTER,
    ) -> None:
        template = get_prompt(prompt) if isinstance(prompt, str) else prompt
        if template.kind is not PromptKind.ANSWER:
            raise ConfigError(f"{template.id} is a {template.kind} prompt, not an answer prompt")
        self.llm = llm
        self.prompt = template
        self.max_tokens = max_tokens if max_tokens is not None else template.max_tokens
        self.temperature = temperature
        self.counter = counter

    def messages(self, question: str, context: str, question_date: datetime | None) -> list[ChatMessage]:
        """The chat messages sent for one question (``context`` already rendered)."""
        values = {"context": context, "question_date": render_date(question_date), "question": question}
        return [{"role": "user", "content": self.prompt.render(values)}]

    def answer(
        self,
        question: str,
        context: Sequence[ContextEntry] | str,
        *,
        question_date: datetime | None,
        namespace: str | None = None,
    ) -> Answer | Failure:
        """Answer ``question`` from ``context`` (entries in display order, or rendered text)."""
        text = context if isinstance(context, str) else render_context(context)
        messages = self.messages(question, text, question_date)
        try:
            result = self.llm.complete_text(
                messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                purpose="answer",
                namespace=namespace,
            )
        except LLMError as exc:
            return Failure.of(
                "answer", exc, model=self.llm.model, prompt_id=self.prompt.id, prompt_sha256=self.prompt.sha256
            )
        return Answer(
            text=result.text.strip(),
            prompt_id=self.prompt.id,
            prompt_sha256=self.prompt.sha256,
            context_tokens=self.counter.count(text),
            prompt_tokens=self.counter.count(messages[0]["content"]),
            counter=self.counter.name,
            usage=CallUsage.of(result),
        )


def adversarial_question(
    question: str, adversarial_answer: str, *, key: str, seed: int = 0
) -> tuple[str, tuple[str, str]]:
    """The official category-5 question and its two options ``(a, b)``.

    The question gets `` Select the correct answer: (a) {} (b) {}. `` with :data:`NOT_MENTIONED` and
    ``adversarial_answer`` in an order drawn from ``seed`` and ``key`` (the sample id), so a rerun asks the
    same question.
    """
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    options = [NOT_MENTIONED, adversarial_answer]
    random.Random(digest).shuffle(options)
    first, second = options
    return f"{question} Select the correct answer: (a) {first} (b) {second}. ", (first, second)


def resolve_choice(reply: str, options: tuple[str, str]) -> str:
    """The option a one-letter reply (``a``, ``(a)``, ``b``, ``(b)``, any case) names; else the reply itself."""
    letter = reply.strip().lower()
    if letter in ("a", "(a)"):
        return options[0]
    if letter in ("b", "(b)"):
        return options[1]
    return reply
