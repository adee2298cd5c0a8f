"""LLM judges: scorers whose model and prompt templates are arguments, and whose every verdict names them.

A judge picks a template per sample, fills it with the question, the gold answer, the response and the
question date, makes one call at temperature 0 and reads the reply by the template's kind:

* ``judge-yes-no`` (LongMemEval's ``evaluate_qa.py``): free text, at most the template's ``max_tokens``
  (10); correct iff ``"yes"`` is in the lower-cased reply.
* ``judge-label`` (mem0's LoCoMo judge and ours): a JSON object ``{"label": ...}`` asked with
  :meth:`~memlane.core.llm.LLM.complete_json` (the client asks for a JSON reply and appends its one-line
  JSON instruction after the template); correct iff the label is exactly ``"CORRECT"``.

Built-in judges (:func:`make_judge`):

* ``longmemeval``: the official per-type prompts, and the abstention prompt for any id containing ``_abs``.
* ``locomo-mem0``: mem0's ``ACCURACY_PROMPT`` (the "J" of the mem0-lineage tables). mem0 never judged
  category 5 (its gold is the answer the false premise invites), so category 5 gets ``abstention-judge-v1``;
  reports keep category 5 out of J by default.
* ``strict``: ``strict-judge-v1`` (the gold fact stated, nothing contradicting it, no hedging),
  ``abstention-judge-v1`` for unanswerable questions, and LongMemEval's own rubric prompt for
  ``single-session-preference``, whose gold is a rubric rather than a fact.

A call that fails once the client's retries are spent gives a :class:`~memlane.bench.qa.records.Failure`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memlane.bench.datasets.model import Sample
from memlane.bench.qa.context import render_date
from memlane.bench.qa.prompts import PromptKind, PromptTemplate, get_prompt
from memlane.bench.qa.records import CallUsage, Failure
from memlane.core.errors import ConfigError, LLMError
from memlane.core.llm import LLM, ChatMessage, JSONSchema

CORRECT_LABEL = "CORRECT"
LABEL_SCHEMA: JSONSchema = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
STRICT_LABEL_SCHEMA: JSONSchema = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "label": {"type": "string", "enum": ["CORRECT", "WRONG"]}},
    "required": ["label"],
}

LONGMEMEVAL_PROMPTS: dict[str, str] = {
    "single-session-user": "lme-judge-default-v1",
    "single-session-assistant": "lme-judge-default-v1",
    "multi-session": "lme-judge-default-v1",
    "temporal-reasoning": "lme-judge-temporal-v1",
    "knowledge-update": "lme-judge-knowledge-update-v1",
    "single-session-preference": "lme-judge-preference-v1",
}
"""Official judge prompt per LongMemEval ``question_type`` (abstention ids use ``lme-judge-abstention-v1``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One judged answer: correct or not, by which judge, model and prompt, and the raw reply."""

    correct: bool
    judge: str
    model: str
    prompt_id: str
    prompt_sha256: str
    reply: str
    usage: CallUsage

    @property
    def score(self) -> float:
        """1.0 if correct, else 0.0."""
        return 1.0 if self.correct else 0.0

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above and ``score``."""
        return {
            "correct": self.correct,
            "score": self.score,
            "judge": self.judge,
            "model": self.model,
            "prompt_id": self.prompt_id,
            "prompt_sha256": self.prompt_sha256,
            "reply": self.reply,
            "usage": self.usage.to_json(),
        }


Selector = Callable[[Sample], str]
"""Picks the id of the prompt a sample is judged with."""


class LLMJudge:
    """A judge: ``select`` names each sample's prompt, ``llm`` answers. ``prompt_ids`` lists every prompt it
    may use (validated up front, and recorded by a run)."""

    def __init__(self, name: str, llm: LLM, select: Selector, prompt_ids: tuple[str, ...]) -> None:
        self.name = name
        self.llm = llm
        self._select = select
        self.prompts: dict[str, PromptTemplate] = {pid: get_prompt(pid) for pid in prompt_ids}
        for template in self.prompts.values():
            if template.kind is PromptKind.ANSWER:
                raise ConfigError(f"{template.id} is an answer prompt, not a judge prompt")

    @property
    def model(self) -> str:
        """The judge model."""
        return self.llm.model

    def prompt_for(self, sample: Sample) -> PromptTemplate:
        """The template ``sample`` is judged with."""
        prompt_id = self._select(sample)
        if prompt_id not in self.prompts:
            raise ConfigError(f"judge {self.name} selected {prompt_id}, which is not among its prompts")
        return self.prompts[prompt_id]

    def messages(self, sample: Sample, response: str) -> list[ChatMessage]:
        """The chat messages sent to judge ``response`` to ``sample``."""
        values = {
            "question": sample.question,
            "gold": sample.answer,
            "response": response,
            "question_date": render_date(sample.question_date),
        }
        # mem0's verbatim template names the same two values differently.
        values["gold_answer"], values["generated_answer"] = values["gold"], values["response"]
        return [{"role": "user", "content": self.prompt_for(sample).render(values)}]

    def judge(self, sample: Sample, response: str, *, namespace: str | None = None) -> Verdict | Failure:
        """Judge ``response`` to ``sample``; a failed call gives a Failure, not a wrong verdict."""
        template = self.prompt_for(sample)
        messages = self.messages(sample, response)
        try:
            if template.kind is PromptKind.JUDGE_YES_NO:
                result = self.llm.complete_text(
                    messages, temperature=0.0, max_tokens=template.max_tokens, purpose="judge", namespace=namespace
                )
                correct = "yes" in result.text.lower()
            else:
                schema = STRICT_LABEL_SCHEMA if template.strict_labels else LABEL_SCHEMA
                result = self.llm.complete_json(
                    messages,
                    schema=schema,
                    temperature=0.0,
                    max_tokens=template.max_tokens,
                    purpose="judge",
                    namespace=namespace,
                )
                # The schema guarantees an object with a string label.
                correct = isinstance(result.parsed, dict) and result.parsed.get("label") == CORRECT_LABEL
        except LLMError as exc:
            return Failure.of("judge", exc, model=self.model, prompt_id=template.id, prompt_sha256=template.sha256)
        usage = CallUsage.of(result)
        return Verdict(correct, self.name, result.model, template.id, template.sha256, result.text, usage)

    def describe(self) -> dict[str, object]:
        """What a run records about the judge: name, model, and id and sha256 of every prompt it may use."""
        return {
            "judge": self.name,
            "model": self.model,
            "prompts": [t.describe() for t in self.prompts.values()],
        }


def longmemeval_judge(
    llm: LLM,
    *,
    prompts: Mapping[str, str] = LONGMEMEVAL_PROMPTS,
    abstention: str = "lme-judge-abstention-v1",
) -> LLMJudge:
    """LongMemEval's official judge: a prompt per question type, ``abstention`` for ``_abs`` ids."""
    table = dict(prompts)

    def select(sample: Sample) -> str:
        # The official test is on the id ('_abs' in question_id), which is what is_abstention records.
        if sample.is_abstention:
            return abstention
        if sample.category not in table:
            raise ConfigError(f"no LongMemEval judge prompt for question type {sample.category!r}")
        return table[sample.category]

    return LLMJudge("longmemeval", llm, select, tuple(dict.fromkeys([*table.values(), abstention])))


def locomo_judge(
    llm: LLM, *, prompt: str = "locomo-judge-mem0-v1", abstention: str = "abstention-judge-v1"
) -> LLMJudge:
    """The mem0-lineage LoCoMo judge; unanswerable (category 5) questions get ``abstention``."""

    def select(sample: Sample) -> str:
        return abstention if sample.is_abstention else prompt

    return LLMJudge("locomo-mem0", llm, select, (prompt, abstention))


def strict_judge(
    llm: LLM,
    *,
    prompt: str = "strict-judge-v1",
    abstention: str = "abstention-judge-v1",
    rubric: str = "lme-judge-preference-v1",
) -> LLMJudge:
    """Our strict judge (see the module docstring)."""

    def select(sample: Sample) -> str:
        if sample.is_abstention:
            return abstention
        return rubric if sample.category == "single-session-preference" else prompt

    return LLMJudge("strict", llm, select, (prompt, abstention, rubric))


JUDGES: dict[str, Callable[[LLM], LLMJudge]] = {
    "longmemeval": longmemeval_judge,
    "locomo-mem0": locomo_judge,
    "strict": strict_judge,
}


def make_judge(name: str, llm: LLM) -> LLMJudge:
    """The built-in judge ``name`` (``longmemeval``, ``locomo-mem0``, ``strict``) using ``llm``."""
    if name not in JUDGES:
        raise ConfigError(f"unknown judge {name!r}; known: {', '.join(sorted(JUDGES))}")
    return JUDGES[name](llm)
