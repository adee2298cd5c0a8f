"""``memlane bench qa`` and ``memlane bench sweep``: thin calls into :mod:`memlane.bench.qa`."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

from memlane.bench.qa.costs import ModelPrice
from memlane.bench.qa.judges import JUDGES
from memlane.bench.qa.llms import LLMOverrides, build_llm
from memlane.bench.qa.prompts import PromptKind, prompt_ids
from memlane.bench.qa.results import format_table, write_qa_reports
from memlane.bench.qa.run import QAOutcome, run_qa
from memlane.bench.qa.runconfig import (
    AUTO,
    CONTEXTS,
    DEFAULT_CONCURRENCY,
    DEFAULT_FULL_CONTEXT_BUDGET,
    DEFAULT_K,
    DEFAULT_MODE,
    QAOptions,
)
from memlane.bench.qa.sweep import SweepGrid, run_sweep, write_sweep_report
from memlane.bench.retrieval.ingest import default_bench_cache
from memlane.core.llm import LLM, CallLog
from memlane.interfaces.cli.bench_cmds import DATASET_CHOICE, F, bench_group, ingest_options, system_specs
from memlane.interfaces.cli.options import (
    SettingOption,
    cli_settings,
    gathered,
    out_option,
    parse_ks,
    quiet_option,
    setting_option,
    split_values,
)

CALL_LOG_NAME = "llm-calls.db"


@dataclass(frozen=True, slots=True)
class QACommandOptions:
    """The options ``bench qa`` and ``bench sweep`` share, as one typed value: the LLMs, the run settings
    that become :class:`~memlane.bench.qa.runconfig.QAOptions`, the bench store, the output."""

    llm_name: str
    judge_name: str
    judge_prompts: str
    context: str
    full_context_budget: int
    concurrency: int
    facts: bool
    extract: bool
    adversarial: bool
    before_question_date: bool
    retry_failed: bool
    llm_log: Path | None
    llm_model: str | None
    llm_base_url: str | None
    judge_model: str | None
    judge_base_url: str | None
    prices: tuple[str, ...]
    as_json: bool
    quiet: bool
    limit: int | None
    perspective: str
    embedder: str
    cache_dir: Path | None
    data_dir: Path | None

    def run_options(self, dataset: str, **fields: Any) -> QAOptions:
        """The QA run's settings; ``fields``: the command's own (k, mode, answer prompt)."""
        return QAOptions(
            dataset=dataset,
            context=self.context,
            limit=self.limit,
            judge=self.judge_prompts,
            adversarial=self.adversarial,
            concurrency=self.concurrency,
            full_context_budget=self.full_context_budget,
            facts=self.facts,
            extract=self.extract,
            before_question_date=self.before_question_date,
            embedder=self.embedder,
            perspective=self.perspective,
            data_dir=self.data_dir,
            cache_dir=self.cache_dir,
            retry_failed=self.retry_failed,
            prices=parse_prices(self.prices),
            **fields,
        )


_SHARED = tuple(f.name for f in fields(QACommandOptions))


def qa_options(func: F) -> F:
    """The options shared by ``bench qa`` and ``bench sweep`` (each with its environment variable), handed
    to the command as one :class:`QACommandOptions` argument named ``shared``."""

    options = [
        setting_option(
            "--llm",
            "llm_name",
            setting="llm",
            default="openai",
            show_default=True,
            help="Answering LLM: openai (MEMLANE_LLM_BASE_URL, MEMLANE_LLM_API_KEY, MEMLANE_LLM_MODEL) or "
            "scripted (offline fake).",
        ),
        setting_option(
            "--judge",
            "judge_name",
            setting="judge",
            default="openai",
            show_default=True,
            help="Judge LLM: openai (MEMLANE_JUDGE_BASE_URL / _API_KEY / _MODEL, each defaulting to the "
            "MEMLANE_LLM_* value) or scripted.",
        ),
        setting_option(
            "--judge-prompts",
            setting="qa_judge_prompts",
            type=click.Choice([AUTO, *sorted(JUDGES)]),
            default=AUTO,
            show_default=True,
            help="Judge prompt set: auto = locomo-mem0 for LoCoMo, longmemeval (official) for LongMemEval; "
            "strict = ours.",
        ),
        setting_option(
            "--context",
            setting="qa_context",
            type=click.Choice(CONTEXTS),
            default="retrieved",
            show_default=True,
            help="retrieved blocks, or the full history within --full-context-budget (the oracle baseline is "
            "longmemeval-oracle with --context full).",
        ),
        setting_option(
            "--full-context-budget",
            setting="qa_full_context_budget",
            type=click.IntRange(min=1),
            default=DEFAULT_FULL_CONTEXT_BUDGET,
            show_default=True,
            help="Token budget of --context full (oldest turns dropped first).",
        ),
        setting_option(
            "--concurrency",
            setting="qa_concurrency",
            type=click.IntRange(min=1),
            default=DEFAULT_CONCURRENCY,
            show_default=True,
            help="Questions (and LLM calls) in flight.",
        ),
        setting_option(
            "--facts/--no-facts",
            setting="qa_facts",
            default=False,
            help="Show the summary and facts stored on each block.",
        ),
        setting_option(
            "--extract/--no-extract",
            setting="qa_extract",
            default=False,
            help="Extract summary and facts of the retrieved exchanges with --llm before answering (one cached "
            "call per exchange; for stores ingested without extraction).",
        ),
        setting_option(
            "--adversarial/--no-adversarial",
            setting="qa_adversarial",
            default=True,
            show_default=True,
            help="Ask LoCoMo category 5 as the official two-option question.",
        ),
        setting_option(
            "--before-question-date/--no-before-question-date",
            setting="bench_before_question_date",
            default=False,
            show_default=True,
            help="Only search sessions dated before the end of the question's day.",
        ),
        setting_option(
            "--retry-failed",
            setting="qa_retry_failed",
            is_flag=True,
            help="On resume, ask again the questions whose record has an error.",
        ),
        setting_option(
            "--llm-log",
            setting="qa_llm_log",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help=f"LLM call log and response cache (SQLite); default <cache dir>/{CALL_LOG_NAME}, shared by "
            "all runs so reruns are free.",
        ),
        setting_option("--llm-model", setting="llm_model", default=None),
        setting_option("--llm-base-url", setting="llm_base_url", default=None),
        setting_option("--judge-model", setting="judge_model", default=None),
        setting_option("--judge-base-url", setting="judge_base_url", default=None),
        click.option(
            "--price",
            "prices",
            multiple=True,
            cls=SettingOption,
            setting="qa_prices",
            help="MODEL=IN/OUT: price per million input/output tokens, repeatable; without one a stage's cost "
            "is unknown, not zero. [env MEMLANE_QA_PRICES, space-separated]",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table."),
        quiet_option,
    ]
    func = gathered(QACommandOptions, {name: name for name in _SHARED}, "shared")(func)
    for option in options:
        func = option(func)
    return ingest_options(func)


def parse_prices(values: tuple[str, ...]) -> dict[str, ModelPrice]:
    """``("gpt-4o-mini=0.15/0.6",)`` -> prices per model."""
    out: dict[str, ModelPrice] = {}
    for value in (p for v in values for p in v.split()):
        model, _, pair = value.rpartition("=")
        inp, _, outp = pair.partition("/")
        try:
            out[model] = ModelPrice(float(inp), float(outp))
        except ValueError:
            raise click.BadParameter(f"expected MODEL=IN/OUT, got {value!r}", param_hint="--price") from None
        if not model:
            raise click.BadParameter(f"expected MODEL=IN/OUT, got {value!r}", param_hint="--price")
    return out


def _llms(shared: QACommandOptions, concurrency: int) -> tuple[LLM, LLM, CallLog]:
    cache = shared.cache_dir or default_bench_cache()
    log = CallLog(shared.llm_log or Path(cache) / CALL_LOG_NAME)
    settings = cli_settings()
    llm = build_llm(
        shared.llm_name,
        role="answer",
        call_log=log,
        settings=settings,
        overrides=LLMOverrides(shared.llm_model, shared.llm_base_url),
        concurrency=concurrency,
    )
    judge = build_llm(
        shared.judge_name,
        role="judge",
        call_log=log,
        settings=settings,
        overrides=LLMOverrides(shared.judge_model, shared.judge_base_url),
        concurrency=concurrency,
    )
    return llm, judge, log


def _close(*llms: LLM) -> None:
    for llm in llms:
        close = getattr(llm, "close", None)
        if callable(close):
            close()


def _summary(outcome: QAOutcome) -> str:
    ing = outcome.ingest
    ingest = "no store (full context)" if ing is None else "warm" if ing.warm else f"{ing.ingested} namespaces ingested"
    return (
        f"ingest: {ingest}; qa: {outcome.written} questions answered now, {outcome.already_logged} already logged, "
        f"{outcome.failed} failed; {outcome.seconds:.1f} s"
    )


@click.command("qa")
@click.argument("dataset", type=DATASET_CHOICE)
@out_option(
    "Run folder: log.jsonl, answers.jsonl, results.json, report.md (+ hypotheses.jsonl for LongMemEval). "
    "An interrupted run there with the same settings is resumed."
)
@setting_option(
    "--answer-prompt",
    setting="qa_answer_prompt",
    default=AUTO,
    show_default=True,
    help=f"Answer prompt id ({', '.join(prompt_ids(PromptKind.ANSWER))}); auto = locomo-short-answer-v1 for "
    "LoCoMo, lme-reader-con-v1 for LongMemEval.",
)
@setting_option(
    "--k",
    setting="qa_k",
    type=click.IntRange(1, 1000),
    default=DEFAULT_K,
    show_default=True,
    help="Exchanges retrieved per question.",
)
@setting_option(
    "--mode",
    setting="qa_mode",
    default=DEFAULT_MODE,
    show_default=True,
    help="Search mode (vector, keyword, hybrid, or a *-messages preset).",
)
@setting_option(
    "--system",
    setting="qa_system",
    default=None,
    help="Answer from this memory system's search instead of memlane's --mode: NAME[:key=value,...] as in "
    "`bench retrieval --system` (docs/bench/peers.md); its k best items are the context.",
)
@qa_options
def qa_cmd(
    dataset: str, out: Path, answer_prompt: str, k: int, mode: str, system: str | None, shared: QACommandOptions
) -> None:
    """QA benchmark: retrieve (or take the full history), answer, score F1 / BLEU-1 / J, report.

    DATASET is locomo, longmemeval-s, longmemeval-oracle, longmemeval-m or longmemeval-s-x500. Prints the
    per-category table and the report path.

    \b
    Example:
      memlane bench qa locomo --out runs/qa-locomo --llm openai --judge openai --k 10 --mode hybrid
      memlane bench qa longmemeval-oracle --out runs/oracle --llm openai --judge openai --context full
      memlane bench qa locomo --out runs/qa-offline --llm scripted --judge scripted --limit 20
      memlane bench qa locomo --out runs/qa-mem0 --llm openai --judge openai --system mem0
    """
    spec = system_specs((system,))[0] if system else None
    options = shared.run_options(dataset, k=k, mode=mode, answer_prompt=answer_prompt, system=spec)
    llm, judge, log = _llms(shared, options.concurrency)
    try:
        outcome = run_qa(options, out, llm=llm, judge_llm=judge, progress=not shared.quiet)
    finally:
        _close(llm, judge)
        log.close()
    if shared.as_json:
        click.echo(json.dumps(outcome.results.results))
        return
    click.echo(_summary(outcome), err=True)
    click.echo(f"\n{dataset}:\n\n{format_table(outcome.results.report)}\n\nreport: {out / 'report.md'}")


@click.command("sweep")
@click.argument("dataset", type=DATASET_CHOICE)
@out_option("Sweep folder: one run folder per setting, sweep.json (the plan) and sweep.md (the comparison). ")
@setting_option(
    "--k", "ks", setting="qa_sweep_ks", default=str(DEFAULT_K), show_default=True, help="k values, comma-separated."
)
@setting_option(
    "--mode",
    "modes",
    setting="qa_sweep_modes",
    multiple=True,
    help=f"Search modes, repeatable or comma-separated; default {DEFAULT_MODE}.",
)
@setting_option(
    "--answer-prompt",
    "answer_prompts",
    setting="qa_sweep_answer_prompts",
    multiple=True,
    help="Answer prompts, repeatable or comma-separated; default auto.",
)
@setting_option(
    "--full-context-baseline",
    setting="qa_sweep_full_context",
    is_flag=True,
    help="Add one full-context run per answer prompt.",
)
@qa_options
def sweep_cmd(
    dataset: str,
    out: Path,
    ks: str,
    modes: tuple[str, ...],
    answer_prompts: tuple[str, ...],
    full_context_baseline: bool,
    shared: QACommandOptions,
) -> None:
    """Sweep k x mode x answer prompt as a list of QA runs over one bench store; compare them in sweep.md.

    \b
    Example:
      memlane bench sweep locomo --out runs/sweep --llm openai --judge openai --k 5,10,20 \\
        --mode keyword,hybrid --answer-prompt locomo-short-answer-v1,resolve-dates-v1 --full-context-baseline
    """
    grid = SweepGrid(
        ks=parse_ks(ks),
        modes=split_values(modes, "--mode") if modes else (DEFAULT_MODE,),
        answer_prompts=split_values(answer_prompts, "--answer-prompt") if answer_prompts else (AUTO,),
        full_context=full_context_baseline,
    )
    base = shared.run_options(dataset)
    llm, judge, log = _llms(shared, base.concurrency)

    def done(name: str, outcome: QAOutcome) -> None:
        click.echo(f"{name}: {_summary(outcome)}", err=True)

    try:
        outcome = run_sweep(base, grid, out, llm=llm, judge_llm=judge, progress=not shared.quiet, on_run=done)
    finally:
        _close(llm, judge)
        log.close()
    if shared.as_json:
        click.echo(json.dumps({name: o.results.results for name, o in outcome.runs}))
        return
    click.echo(f"\n{outcome.report}\n\nreport: {out / 'sweep.md'}")


@click.command("qa-report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--price",
    "prices",
    multiple=True,
    cls=SettingOption,
    setting="qa_prices",
    help="MODEL=IN/OUT per million tokens, repeatable. [env MEMLANE_QA_PRICES, space-separated]",
)
def qa_report_cmd(run_dir: Path, prices: tuple[str, ...]) -> None:
    """Recompute answers.jsonl, results.json, report.md (and hypotheses.jsonl) of a QA run from its log;
    for a sweep folder, of every run and sweep.md. No LLM is called.

    \b
    Example:
      memlane bench qa-report runs/qa-locomo --price gpt-4o-mini=0.15/0.6
    """
    price_map = parse_prices(prices)
    if (run_dir / "sweep.json").is_file():
        for name in json.loads((run_dir / "sweep.json").read_text(encoding="utf-8")).get("runs", []):
            write_qa_reports(run_dir / str(name), prices=price_map)
        click.echo(write_sweep_report(run_dir))
        return
    computed = write_qa_reports(run_dir, prices=price_map)
    click.echo(f"{format_table(computed.report)}\n\nreport: {run_dir / 'report.md'}")


def register(group: click.Group) -> None:
    """Add ``qa`` and ``sweep`` to the ``bench`` group (``group`` is the root, as for the other modules)."""
    del group  # the bench group is imported directly
    for cmd in (qa_cmd, sweep_cmd, qa_report_cmd):
        bench_group.add_command(cmd)
