"""The prompt registry: pinned hashes, verbatim copies of the benchmarks' prompts, byte-identical rendering."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace

import pytest
from qa_support import lme_sample, locomo_sample, shared_readme

from memlane.bench.qa import prompts
from memlane.bench.qa.judges import LONGMEMEVAL_PROMPTS, locomo_judge, longmemeval_judge
from memlane.bench.qa.prompts import PromptKind, PromptTemplate, get_prompt, prompt_ids, register_prompt
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.llm import ScriptedLLM

LME_TYPES = sorted(LONGMEMEVAL_PROMPTS)


def json_literal_after(readme: str, marker: str) -> str:
    """The first fenced ```json string literal after ``marker`` in a README."""
    start = readme.index(marker)
    match = re.compile(r"```json\n(.*?)\n```", re.DOTALL).search(readme, start)
    assert match is not None, marker
    value = json.loads(match.group(1))
    assert isinstance(value, str)
    return value


def inline_literal(readme: str, marker: str) -> str:
    """The inline-code JSON string literal that follows ``marker`` (which ends with the opening backtick)."""
    start = readme.index(marker) + len(marker)
    return readme[start : readme.index("`", start)]


LME_VERBATIM = {
    "lme-judge-default-v1": "#### `single-session-user`, `single-session-assistant`, `multi-session`",
    "lme-judge-temporal-v1": "#### `temporal-reasoning`",
    "lme-judge-knowledge-update-v1": "#### `knowledge-update`",
    "lme-judge-preference-v1": "#### `single-session-preference`",
    "lme-judge-abstention-v1": "#### abstention",
    "lme-reader-con-v1": "* step-by-step (`con` / `con-separate`), plain history:",
    "lme-reader-direct-v1": "* direct, plain history:",
}


def test_every_builtin_loads_with_its_pinned_hash() -> None:
    ids = prompt_ids()
    assert len(ids) >= 13
    for pid in ids:
        template = get_prompt(pid)
        assert template.id == pid
        assert len(template.sha256) == 64
        assert re.fullmatch(r".+-v\d+", pid)


def test_kinds_partition_the_registry() -> None:
    answers = set(prompt_ids(PromptKind.ANSWER))
    assert {"lme-reader-direct-v1", "lme-reader-con-v1", "locomo-short-answer-v1", "resolve-dates-v1"} <= answers
    assert "lme-judge-default-v1" in prompt_ids(PromptKind.JUDGE_YES_NO)
    assert "locomo-judge-mem0-v1" in prompt_ids(PromptKind.JUDGE_LABEL)


@pytest.mark.parametrize("prompt_id", sorted(LME_VERBATIM))
def test_longmemeval_prompts_are_verbatim(prompt_id: str) -> None:
    readme = shared_readme("longmemeval")
    assert get_prompt(prompt_id).text == json_literal_after(readme, LME_VERBATIM[prompt_id])


def test_mem0_judge_prompt_is_verbatim() -> None:
    readme = shared_readme("locomo")
    assert get_prompt("locomo-judge-mem0-v1").text == json_literal_after(readme, "Exact string as a JSON literal:")


def test_locomo_answer_prompts_end_with_the_official_qa_prompts() -> None:
    readme = shared_readme("locomo")
    qa_prompt = json.loads(inline_literal(readme, "the full `QA_PROMPT` string is `"))
    adversarial = json.loads(inline_literal(readme, "category-5 questions use the shorter `"))
    assert get_prompt("locomo-short-answer-v1").text.endswith(qa_prompt.replace("{}", "{question}"))
    assert get_prompt("locomo-adversarial-v1").text.endswith(adversarial.replace("{}", "{question}"))


@pytest.mark.parametrize("qtype", LME_TYPES)
@pytest.mark.parametrize("abstention", [False, True])
def test_longmemeval_judge_renders_byte_identical_to_the_official_template(qtype: str, abstention: bool) -> None:
    readme = shared_readme("longmemeval")
    sample = lme_sample(qtype, qid="gpt4_1_abs" if abstention else "gpt4_1", answer="3 {days}")
    response = "It took 3 days.\nDone {ok}"
    judge = longmemeval_judge(ScriptedLLM("yes"))
    marker = LME_VERBATIM["lme-judge-abstention-v1" if abstention else LONGMEMEVAL_PROMPTS[qtype]]
    official = json_literal_after(readme, marker).format(sample.question, sample.answer, response)
    assert judge.messages(sample, response) == [{"role": "user", "content": official}]


def test_mem0_judge_renders_byte_identical_to_the_official_template() -> None:
    readme = shared_readme("locomo")
    sample = locomo_sample(4, answer="A shell necklace")
    official = json_literal_after(readme, "Exact string as a JSON literal:").format(
        question=sample.question, gold_answer=sample.answer, generated_answer="a necklace"
    )
    assert locomo_judge(ScriptedLLM("{}")).messages(sample, "a necklace")[0]["content"] == official


def test_positional_rendering_fills_fields_in_order() -> None:
    template = get_prompt("lme-reader-direct-v1")
    text = template.render({"question": "Q?", "context": "CTX", "question_date": "DATE"})
    assert text.endswith("History Chats:\n\nCTX\n\nCurrent Date: DATE\nQuestion: Q?\nAnswer:")


def test_render_names_a_missing_field() -> None:
    with pytest.raises(ValidationError, match="question"):
        get_prompt("lme-judge-default-v1").render({"gold": "g", "response": "r"})


def test_a_changed_builtin_file_is_refused() -> None:
    spec = prompts._BUILTINS["lme-judge-default-v1"]
    with pytest.raises(ConfigError, match="new id"):
        prompts._load_builtin("lme-judge-default-v1", replace(spec, sha256="0" * 64))


def test_register_a_variant() -> None:
    variant = PromptTemplate(
        id="test-answer-v1",
        kind=PromptKind.ANSWER,
        text="{context}|{question_date}|{question}",
        fields=("context", "question_date", "question"),
        positional=False,
        source="test",
    )
    register_prompt(variant)
    register_prompt(variant)  # the same template again is fine
    assert variant.sha256 == hashlib.sha256(b"{context}|{question_date}|{question}").hexdigest()
    assert get_prompt("test-answer-v1") is variant
    with pytest.raises(ConfigError, match="already registered"):
        register_prompt(replace(variant, text="other {context}"))
    with pytest.raises(ConfigError, match="built-in"):
        register_prompt(replace(variant, id="lme-judge-default-v1"))


def test_unknown_prompt() -> None:
    with pytest.raises(ConfigError, match="known"):
        get_prompt("no-such-prompt-v1")
