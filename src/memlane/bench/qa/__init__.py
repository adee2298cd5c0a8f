"""Question answering for the benchmarks: context, answerer, scorers (F1, BLEU-1, LLM judges), aggregates.

Quickstart::

    answerer = Answerer(llm, "lme-reader-con-v1")
    answer = answerer.answer(sample.question, retrieved_entries(hits), question_date=sample.question_date)
    judge = make_judge("longmemeval", judge_llm)
    verdict = judge.judge(sample, answer.text)           # Verdict, or Failure when the call failed
    report = longmemeval_report([SampleScores.of(sample, {"j": verdict.score})])
"""

from memlane.bench.qa.aggregate import (
    CategoryRow,
    MetricSummary,
    QAReport,
    SampleScores,
    locomo_report,
    longmemeval_report,
    summarize,
)
from memlane.bench.qa.answering import (
    DEFAULT_ANSWER_PROMPT,
    NOT_MENTIONED,
    Answer,
    Answerer,
    adversarial_question,
    resolve_choice,
)
from memlane.bench.qa.bleu import bleu1, word_tokens
from memlane.bench.qa.bootstrap import BootstrapSettings, bootstrap_ci, stratified_bootstrap_ci
from memlane.bench.qa.context import (
    ContextEntry,
    FullContext,
    block_entry,
    full_context,
    history_end,
    render_context,
    render_date,
    retrieved_entries,
)
from memlane.bench.qa.costs import ModelPrice, StageCost, stage_costs, total_cost
from memlane.bench.qa.export import read_hypotheses, write_hypotheses
from memlane.bench.qa.judges import (
    JUDGES,
    LONGMEMEVAL_PROMPTS,
    LLMJudge,
    Verdict,
    locomo_judge,
    longmemeval_judge,
    make_judge,
    strict_judge,
)
from memlane.bench.qa.prompts import PromptKind, PromptTemplate, get_prompt, prompt_ids, register_prompt
from memlane.bench.qa.records import CallUsage, Failure
from memlane.bench.qa.scoring import locomo_f1, mem0_f1, normalize_answer, token_f1
from memlane.bench.qa.tokens import DEFAULT_COUNTER, CharsPerToken, TokenCounter

__all__ = [
    "DEFAULT_ANSWER_PROMPT",
    "DEFAULT_COUNTER",
    "JUDGES",
    "LONGMEMEVAL_PROMPTS",
    "NOT_MENTIONED",
    "Answer",
    "Answerer",
    "BootstrapSettings",
    "CallUsage",
    "CategoryRow",
    "CharsPerToken",
    "ContextEntry",
    "Failure",
    "FullContext",
    "LLMJudge",
    "MetricSummary",
    "ModelPrice",
    "PromptKind",
    "PromptTemplate",
    "QAReport",
    "SampleScores",
    "StageCost",
    "TokenCounter",
    "Verdict",
    "adversarial_question",
    "bleu1",
    "block_entry",
    "bootstrap_ci",
    "full_context",
    "get_prompt",
    "history_end",
    "locomo_f1",
    "locomo_judge",
    "locomo_report",
    "longmemeval_judge",
    "longmemeval_report",
    "make_judge",
    "mem0_f1",
    "normalize_answer",
    "prompt_ids",
    "read_hypotheses",
    "register_prompt",
    "render_context",
    "render_date",
    "resolve_choice",
    "retrieved_entries",
    "stage_costs",
    "stratified_bootstrap_ci",
    "strict_judge",
    "summarize",
    "token_f1",
    "total_cost",
    "word_tokens",
    "write_hypotheses",
]
