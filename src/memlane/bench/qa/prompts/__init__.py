"""Versioned prompt templates (answer prompts and judge prompts), each pinned by the sha256 of its text.

A template's text is a file of this package, byte for byte: nothing is stripped or added on reading (the
official LongMemEval prompts end without a newline, mem0's judge prompt starts and ends with one, some lines
end in a space). The sha256 of every built-in file is pinned below, so an edit that is not also a new
version fails when the prompt is loaded instead of silently changing what a published score means. Ids end
in ``-v<N>``; a changed prompt gets a new id.

Placeholders: ``positional`` templates use ``{}`` and are filled with ``str.format(*values)`` in the order of
``fields``, exactly as the official scripts fill them; the others use ``{name}`` (literal braces doubled).
Field names: answer prompts take ``context``, ``question_date``, ``question``; judge prompts take
``question``, ``gold``, ``response`` and ``question_date``, and ``gold_answer``/``generated_answer`` (the
names mem0's verbatim template uses) for ``gold``/``response``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources

from memlane.core.errors import ConfigError, ValidationError


class PromptKind(StrEnum):
    """What a template is for, and so how its reply is read."""

    ANSWER = "answer"  # free text: the answer
    JUDGE_YES_NO = "judge-yes-no"  # free text: correct iff "yes" is in the lower-cased reply (LongMemEval)
    JUDGE_LABEL = "judge-label"  # JSON {"label": ...}: correct iff the label is exactly "CORRECT" (mem0)


@dataclass(frozen=True)
class PromptTemplate:
    """One versioned prompt.

    ``source`` says where the text comes from (``verbatim: ...`` for copies of a benchmark's prompt).
    ``max_tokens`` is the generation limit the source uses (``None``: the caller's). ``strict_labels``
    (label judges) makes the reply schema accept only ``CORRECT``/``WRONG``, so a model that answers
    anything else is re-asked by the client; mem0's own judge accepted any label and scored it 0.
    """

    id: str
    kind: PromptKind
    text: str
    fields: tuple[str, ...]
    positional: bool
    source: str
    max_tokens: int | None = None
    strict_labels: bool = False
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", hashlib.sha256(self.text.encode("utf-8")).hexdigest())

    def render(self, values: Mapping[str, str]) -> str:
        """Fill the placeholders; raises ValidationError naming a missing field."""
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise ValidationError(f"prompt {self.id} needs {missing}", where="prompt values")
        if self.positional:
            return self.text.format(*(values[f] for f in self.fields))
        return self.text.format(**{f: values[f] for f in self.fields})

    def describe(self) -> dict[str, str]:
        """``{"prompt_id", "prompt_sha256"}``: what a run records about the prompt."""
        return {"prompt_id": self.id, "prompt_sha256": self.sha256}


@dataclass(frozen=True)
class _Builtin:
    """A prompt shipped with the harness, in the file ``<prompt id>.txt`` beside this module."""

    kind: PromptKind
    fields: tuple[str, ...]
    positional: bool
    sha256: str
    source: str
    max_tokens: int | None = None
    strict_labels: bool = False


_LME_JUDGE = ("question", "gold", "response")
_LME_READER = ("context", "question_date", "question")
_LME_EVAL = "verbatim: LongMemEval src/evaluation/evaluate_qa.py (xiaowu0162/LongMemEval @9e0b455)"
_LME_GEN = "verbatim: LongMemEval src/generation/run_generation.py (xiaowu0162/LongMemEval @9e0b455)"
_OURS = "memlane"


def _lme_judge(sha256: str, used_for: str) -> _Builtin:
    """One of LongMemEval's yes/no judge prompts, verbatim; ``used_for``: the questions it judges."""
    return _Builtin(PromptKind.JUDGE_YES_NO, _LME_JUDGE, True, sha256, f"{_LME_EVAL}; {used_for}", max_tokens=10)


def _lme_reader(sha256: str, method: str, max_tokens: int) -> _Builtin:
    """One of LongMemEval's reader (answer) prompts, verbatim; ``method``: how it reads the history."""
    return _Builtin(PromptKind.ANSWER, _LME_READER, True, sha256, f"{_LME_GEN}; {method}", max_tokens=max_tokens)


def _short_answer(sha256: str, source: str) -> _Builtin:
    """One of memlane's short-answer prompts: the reader's fields, by name; 100 tokens of answer."""
    return _Builtin(PromptKind.ANSWER, _LME_READER, False, sha256, _OURS + source, max_tokens=100)


# Pinned hashes: checked when a prompt is first loaded. The verbatim ones are also compared with the data
# sets' READMEs by the tests.
_BUILTINS: dict[str, _Builtin] = {
    "lme-judge-default-v1": _lme_judge(
        "fba020ba3d57982efdc9a937c1c01f897b789a608c7f88e60244121f6505e5bc",
        "single-session-user, single-session-assistant, multi-session",
    ),
    "lme-judge-temporal-v1": _lme_judge(
        "8d33a5fdd83afeeb4592454a965eab43d1fcb2dedc042d1d3892f4254be6c273", "temporal-reasoning"
    ),
    "lme-judge-knowledge-update-v1": _lme_judge(
        "183a9b3a6197ec620940f610cdc1207201ec98c1113dd633ea685cfc322fafac", "knowledge-update"
    ),
    "lme-judge-preference-v1": _lme_judge(
        "741ee3bcbea7ff5e8ed359acef61d2f8ded3de021bbcff6ee13de455f2e2aa9b",
        "single-session-preference (gold = the rubric)",
    ),
    "lme-judge-abstention-v1": _lme_judge(
        "5c0b365a1e1d06db36377c735432b56e122ca3c428f89faf61d43a0d5a7e050b",
        "question ids containing _abs (gold = the explanation)",
    ),
    "locomo-judge-mem0-v1": _Builtin(
        PromptKind.JUDGE_LABEL,
        ("question", "gold_answer", "generated_answer"),
        False,
        "62395dd312a631dfd9355026a0b69cc936018274c3198b6365b5c2a5c9bca9e0",
        "verbatim: mem0 evaluation/metrics/llm_judge.py ACCURACY_PROMPT (mem0ai/mem0 evaluation/, "
        "last commit before its removal)",
    ),
    "strict-judge-v1": _Builtin(
        PromptKind.JUDGE_LABEL,
        ("question_date", "question", "gold", "response"),
        False,
        "61cb4ffbb8c83d8139873a409d090744b0d5866b84c876ea17149ccd534b5225",
        _OURS + ": gold fact stated, no contradiction, no hedging",
        max_tokens=200,
        strict_labels=True,
    ),
    "abstention-judge-v1": _Builtin(
        PromptKind.JUDGE_LABEL,
        ("question", "response"),
        False,
        "3cf00097d3e1463452ce85483f1ca7aeac51213b550416c3f0c08f4b6c485084",
        _OURS + ": unanswerable questions (LoCoMo category 5, strict judge on LongMemEval _abs)",
        max_tokens=200,
        strict_labels=True,
    ),
    "lme-reader-direct-v1": _lme_reader(
        "e427ff913456e51a132ec865b1b5038d562bdc36890976943ad421cc9b365c9d", "direct reading, plain history", 500
    ),
    "lme-reader-con-v1": _lme_reader(
        "9e2b3110622929ab896696dd8937231c7436740ec3b9586f653f97346e19ab2c",
        "Chain-of-Note (step by step), plain history",
        800,
    ),
    "locomo-short-answer-v1": _short_answer(
        "eae15db7730c2aac6af86991b8b8431914c29bed2ba7ebaef95c4c0558bd8bb8",
        " context header, then verbatim LoCoMo task_eval/gpt_utils.py QA_PROMPT",
    ),
    "locomo-adversarial-v1": _short_answer(
        "d5e24e486a58b7c9431e7b57f5e89fadf90f91b0b11fc5055ce1bb21c7b5b748",
        " context header, then the verbatim LoCoMo category-5 prompt of task_eval/gpt_utils.py "
        "(the question carries the two options: see answering.adversarial_question)",
    ),
    "resolve-dates-v1": _short_answer(
        "3b12814d04b87ef7bbbbaa776df378e39075c285ab5d7f7b1de62aedff69e0d6",
        ": short answer, relative dates resolved against each memory's date and the question date",
    ),
}

_LOCK = threading.Lock()
_LOADED: dict[str, PromptTemplate] = {}


def _load_builtin(prompt_id: str, spec: _Builtin) -> PromptTemplate:
    file = f"{prompt_id}.txt"
    text = resources.files(__name__).joinpath(file).read_bytes().decode("utf-8")
    template = PromptTemplate(
        id=prompt_id,
        kind=spec.kind,
        text=text,
        fields=spec.fields,
        positional=spec.positional,
        source=spec.source,
        max_tokens=spec.max_tokens,
        strict_labels=spec.strict_labels,
    )
    if template.sha256 != spec.sha256:
        raise ConfigError(
            f"prompt file {file} has sha256 {template.sha256}, but {prompt_id} is pinned to {spec.sha256}: "
            "a changed prompt needs a new id"
        )
    return template


def get_prompt(prompt_id: str) -> PromptTemplate:
    """The template registered as ``prompt_id``; raises ConfigError naming the known ids."""
    with _LOCK:
        if prompt_id not in _LOADED and prompt_id in _BUILTINS:
            _LOADED[prompt_id] = _load_builtin(prompt_id, _BUILTINS[prompt_id])
        template = _LOADED.get(prompt_id)
    if template is None:
        raise ConfigError(f"unknown prompt {prompt_id!r}; known: {', '.join(prompt_ids())}")
    return template


def register_prompt(template: PromptTemplate, *, replace: bool = False) -> None:
    """Add a prompt (a variant under test, a third party's); a taken id needs ``replace=True``.

    Built-in ids cannot be replaced: their meaning is pinned by their hash.
    """
    with _LOCK:
        if template.id in _BUILTINS:
            raise ConfigError(f"{template.id} is a built-in prompt; register a variant under a new id")
        if template.id in _LOADED and not replace and _LOADED[template.id] != template:
            raise ConfigError(f"a prompt with id {template.id!r} is already registered")
        _LOADED[template.id] = template


def prompt_ids(kind: PromptKind | None = None) -> list[str]:
    """Registered prompt ids (built-ins and added ones), sorted; only those of ``kind`` when given."""
    with _LOCK:
        kinds = {pid: spec.kind for pid, spec in _BUILTINS.items()}
        kinds.update({pid: t.kind for pid, t in _LOADED.items()})
    return sorted(pid for pid, k in kinds.items() if kind is None or k is kind)
