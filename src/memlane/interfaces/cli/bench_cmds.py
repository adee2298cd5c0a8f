"""``memlane bench ...``: the harness's commands (thin calls into ``memlane.bench``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from memlane.bench.datasets.registry import DATASETS
from memlane.bench.perf import PerfSettings, format_report, run_perf
from memlane.bench.reports.compare import format_compare
from memlane.bench.reports.report import format_headline, format_mode_table, format_modes_table, write_reports
from memlane.bench.reports.results import load_results
from memlane.bench.retrieval.baselines import BASELINES
from memlane.bench.retrieval.ingest import ingest
from memlane.bench.retrieval.run import DEFAULT_MODES, RetrievalOptions, open_bench, run_retrieval
from memlane.bench.retrieval.runlog import DEFAULT_EMBEDDER, DEFAULT_KS
from memlane.bench.systems import SYSTEMS, SystemSpec, parse_system_spec
from memlane.core.embedding.protocol import make_embedder
from memlane.core.errors import ValidationError
from memlane.core.retrieval import PRESETS
from memlane.core.store.candidates.annsettings import DEFAULT_THRESHOLD, AnnSettings
from memlane.core.store.postgres import is_postgres_url
from memlane.interfaces.cli.dataset_cmds import data_dir_option
from memlane.interfaces.cli.options import (
    SettingOption,
    bench_cache_option,
    cli_settings,
    out_option,
    parse_ks,
    quiet_option,
    setting_option,
)
from memlane.settings import bench_cache_from_env

F = TypeVar("F", bound=Callable[..., Any])
DATASET_CHOICE = click.Choice(sorted(DATASETS))
# The cut-offs a retrieval report scores (``bench retrieval`` and ``bench baselines``).
ks_option = setting_option(
    "--k",
    "ks",
    setting="bench_ks",
    default=",".join(map(str, DEFAULT_KS)),
    show_default=True,
    help="Cut-offs to score, comma-separated.",
)


@click.group("bench")
def bench_group() -> None:
    """Benchmarks: performance of the core, retrieval quality on LoCoMo and LongMemEval.

    \b
    Example:
      memlane bench retrieval locomo --out runs/locomo
      memlane bench report runs/locomo
    """


@bench_group.command("citus")
@click.option("--plain", "plain_url", required=True, help="A postgresql:// URL of a plain PostgreSQL server.")
@click.option("--citus", "citus_url", required=True, help="A postgresql:// URL of a Citus coordinator's database.")
@click.option("--sizes", default="100,5000", show_default=True, help="Blocks per user for the search figures.")
@click.option("--queries", type=int, default=60, show_default=True, help="Searches per size on each store.")
@click.option("--move-blocks", type=int, default=10_000, show_default=True, help="Blocks of the user moved.")
@click.option(
    "--ann-blocks",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Real exchanges of a user past the approximate index's threshold (its index on the user's shard on "
    "Citus): vector search p50 and recall@10 against exact on both stores; 0: none.",
)
@setting_option(
    "--embedder", setting="embedder", default="minilm-128", show_default=True, help="The real embedder of --ann-blocks."
)
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the figures.")
def citus_bench_cmd(
    plain_url: str,
    citus_url: str,
    sizes: str,
    queries: int,
    move_blocks: int,
    ann_blocks: int,
    embedder: str,
    data_dir: Path | None,
    as_json: bool,
) -> None:
    """The store through a Citus coordinator against one plain server, side by side (searches and adds
    alternating), a large user with its approximate index, and a user's shard isolated and moved under four
    writers (memlane.bench.citus).

    \b
    Example:
      memlane bench citus --plain postgresql://localhost/memlane --citus postgresql://coordinator/memlane
    """
    from memlane.bench.citus import CitusBenchSettings, format_citus_report, run_citus_bench

    cfg = CitusBenchSettings(
        sizes=tuple(int(x) for x in sizes.split(",") if x.strip()), queries=queries, move_blocks=move_blocks,
        ann_blocks=ann_blocks, data_dir=data_dir or cli_settings().data, cache_dir=bench_cache_from_env(),
    )  # fmt: skip
    emb = make_embedder(embedder, cli_settings().embedder_config()) if ann_blocks else None
    figures = run_citus_bench(plain_url, citus_url, cfg, progress=lambda m: click.echo(m, err=True), embedder=emb)
    click.echo(json.dumps(figures) if as_json else format_citus_report(figures))


@bench_group.command("perf")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the figures.")
@setting_option("--embedder", setting="embedder", default="minilm", show_default=True)
@setting_option(
    "--sizes",
    setting="perf_sizes",
    default="1000,10000,100000",
    show_default=True,
    help="Blocks per user for the search figures.",
)
@click.option("--queries", type=int, default=100, show_default=True, help="Search queries per size and mode.")
@setting_option(
    "--store",
    setting="perf_store",
    default=None,
    help="A postgresql:// URL to measure the PostgreSQL backend there (in throwaway schemas); default: the "
    "embedded SQLite store in a temporary folder.",
)
@setting_option(
    "--out",
    "out_dir",
    setting="perf_out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="A folder for perf.json and perf-curve.png (each stage's p50 against the user's size, log-log).",
)
@setting_option(
    "--ann-threshold",
    setting="ann_threshold",
    type=click.IntRange(min=-1),
    default=DEFAULT_THRESHOLD,
    show_default=True,
    help="Users with at least this many keys are searched through an approximate index; 0: every user, "
    "-1: none (exact scans only).",
)
@setting_option(
    "--ann-ef-search",
    setting="ann_ef_search",
    type=click.IntRange(min=2),
    default=AnnSettings.ef_search,
    show_default=True,
    help="The index's search beam.",
)
@click.option(
    "--vectors",
    type=click.Choice(["synthetic", "real"]),
    default="synthetic",
    show_default=True,
    help="The large users' blocks: synthetic (Zipf words, near-copies of 1,000 sentence vectors) or real "
    "conversation turns (LongMemEval-S from the data folder when it is there, else the LoCoMo that ships, "
    "repeated a year apart), embedded once into a vector cache under the bench cache folder.",
)
@click.option(
    "--filter-selectivity",
    default="",
    help="Comma-separated shares of each large user's blocks (e.g. 0.01,0.1,0.5) that an annotation filter "
    "keeps: filtered search p50 against the unfiltered one of the same run, and filtered recall@10 against "
    "the exact filtered answer.",
)
@data_dir_option
def perf_cmd(
    as_json: bool,
    embedder: str,
    sizes: str,
    queries: int,
    store: str | None,
    out_dir: Path | None,
    ann_threshold: int,
    ann_ef_search: int,
    vectors: str,
    filter_selectivity: str,
    data_dir: Path | None,
) -> None:
    """Measure ingest latency, bulk throughput and search latency on the embedded default (or PostgreSQL).

    \b
    Example:
      memlane bench perf --json
      memlane bench perf --sizes 1000,10000,100000,1000000 --out runs/perf
      memlane bench perf --store postgresql://memlane@127.0.0.1:5432/memlane
      memlane bench perf --sizes 100000 --vectors real --filter-selectivity 0.01,0.1,0.5
    """
    try:
        size_list = tuple(int(s) for s in sizes.split(",") if s.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {sizes!r}", param_hint="--sizes") from None
    ann = AnnSettings(threshold=None if ann_threshold < 0 else ann_threshold, ef_search=ann_ef_search, background=False)
    try:
        shares = tuple(float(s) for s in filter_selectivity.split(",") if s.strip())
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated numbers, got {filter_selectivity!r}", param_hint="--filter-selectivity"
        ) from None
    if any(not 0 < s <= 1 for s in shares):
        raise click.BadParameter("each share must be in (0, 1]", param_hint="--filter-selectivity")
    settings = replace(
        PerfSettings(),
        sizes=size_list,
        queries=queries,
        ann=ann,
        vectors=vectors,
        data_dir=data_dir or cli_settings().data,
        cache_dir=bench_cache_from_env(),
        filter_selectivity=shares,
    )
    emb = make_embedder(embedder, cli_settings().embedder_config())
    if store is not None and not is_postgres_url(store):
        raise click.BadParameter(f"expected a postgresql:// URL, got {store!r}", param_hint="--store")
    figures = run_perf(emb, settings, progress=lambda m: click.echo(f"... {m}", err=True), store=store, out_dir=out_dir)
    if as_json:
        click.echo(json.dumps({k: round(v, 3) for k, v in figures.items()}))
    else:
        click.echo(format_report(figures))


def ingest_options(func: F) -> F:
    """Options naming a bench store: data, cache, embedder, perspective, limit (each with its env var)."""
    options = [
        setting_option(
            "--limit",
            setting="bench_limit",
            type=click.IntRange(min=1),
            default=None,
            help="Only the first N questions (and the namespaces they need).",
        ),
        setting_option(
            "--perspective",
            setting="bench_perspective",
            type=click.Choice(["auto", "dual", "speakers", "single"]),
            default="auto",
            show_default=True,
            help="Perspective mode of the bench store; auto = speakers for LoCoMo, single for LongMemEval.",
        ),
        setting_option(
            "--embedder",
            setting="bench_embedder",
            default=DEFAULT_EMBEDDER,
            show_default=True,
            help="Embedder by name (minilm-128, minilm, hashing, openai).",
        ),
        bench_cache_option(
            "Where bench stores and the shared embedding cache live; default "
            "<MEMLANE_CACHE_DIR or ~/.cache/memlane>/bench. [env MEMLANE_BENCH_CACHE]"
        ),
        data_dir_option,
    ]
    for option in options:
        func = option(func)
    return func


def _modes(values: tuple[str, ...]) -> tuple[str, ...]:
    # Accept "--mode vector --mode hybrid", "--mode vector,hybrid" and MEMLANE_BENCH_MODES="vector hybrid".
    modes = [m.strip() for v in values for m in v.split(",") if m.strip()]
    return tuple(dict.fromkeys(modes)) or DEFAULT_MODES


def baseline_names(value: str | None, dataset: str | None = None) -> tuple[str, ...]:
    """Baseline names from "a,b" or MEMLANE_BENCH_BASELINES="a b"; with ``dataset``, "default" names the
    data set family's defaults."""
    if not value:
        return ()
    names = tuple(dict.fromkeys(n.strip() for n in value.replace(" ", ",").split(",") if n.strip()))
    if dataset is not None and names == ("default",):
        return DATASETS[dataset].family.baselines
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise click.BadParameter(
            f"unknown baseline {unknown[0]!r}; known: {', '.join(BASELINES)}", param_hint="--baselines"
        )
    return names


def system_specs(values: tuple[str, ...]) -> tuple[SystemSpec, ...]:
    """``--system`` values ("a --system b", or MEMLANE_BENCH_SYSTEMS="a b") as specs; a bad one exits 2."""
    out = []
    for value in (v for raw in values for v in raw.split()):
        try:
            out.append(parse_system_spec(value))
        except ValidationError as exc:
            raise click.BadParameter(str(exc), param_hint="--system") from None
    return tuple(out)


@bench_group.command("retrieval")
@click.argument("dataset", type=DATASET_CHOICE)
@out_option(
    "Run folder: log.jsonl, rankings*.jsonl, report.md, results.json/.csv, recall.png. An existing "
    "log there with the same settings is resumed."
)
@click.option(
    "--mode",
    "modes",
    multiple=True,
    cls=SettingOption,
    setting="bench_modes",
    help=f"Search mode, repeatable ({', '.join(PRESETS)}); default {', '.join(DEFAULT_MODES)}. "
    "[env MEMLANE_BENCH_MODES, space-separated]",
)
@ks_option
@setting_option(
    "--depth",
    setting="bench_depth",
    type=click.IntRange(1, 1000),
    default=None,
    help="Blocks retrieved per question; default max(k) exchanges' worth.",
)
@setting_option(
    "--before-question-date/--no-before-question-date",
    setting="bench_before_question_date",
    default=False,
    show_default=True,
    help="Only search sessions dated before the end of the question's day.",
)
@setting_option(
    "--baselines",
    "baselines",
    setting="bench_baselines",
    default=None,
    help="Also rank every question with these reference retrievers, in the same run and report: "
    f"comma-separated names of {', '.join(BASELINES)}, or 'default' (the data set's defaults, as "
    "`bench baselines`).",
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    cls=SettingOption,
    setting="bench_systems",
    help="A memory system to measure through the same loop, repeatable: NAME[:key=value,...] with NAME one of "
    f"{', '.join(sorted(SYSTEMS))} (docs/bench/peers.md); as=LABEL names it in the report. Without --mode, "
    "only the systems run. [env MEMLANE_BENCH_SYSTEMS, space-separated]",
)
@quiet_option
@setting_option(
    "--ann-threshold",
    setting="bench_ann_threshold",
    type=click.IntRange(min=0),
    default=None,
    help="Search users of at least this many keys through the approximate index; 0 forces it on for every "
    "user (to compare with an exact run). Default: the store's threshold.",
)
@setting_option(
    "--per-category",
    setting="bench_per_category",
    type=click.IntRange(min=1),
    default=None,
    help="Only the first N questions of each category (in data-set order) and the namespaces they need: a "
    "sample that weighs every question type alike.",
)
@ingest_options
def retrieval_cmd(
    dataset: str,
    out: Path,
    modes: tuple[str, ...],
    ks: str,
    depth: int | None,
    before_question_date: bool,
    baselines: str | None,
    systems: tuple[str, ...],
    quiet: bool,
    ann_threshold: int | None,
    per_category: int | None,
    limit: int | None,
    perspective: str,
    embedder: str,
    cache_dir: Path | None,
    data_dir: Path | None,
) -> None:
    """Retrieval benchmark: ingest DATASET once, search every question in every mode, score, report.

    DATASET is locomo, longmemeval-s, longmemeval-oracle, longmemeval-m or longmemeval-s-x500. Prints the
    per-category table of each mode and the report path.

    \b
    Example:
      memlane bench retrieval locomo --out runs/locomo
      memlane bench retrieval longmemeval-s --out runs/lme-s --mode hybrid --k 5,10,50 --limit 50
      memlane bench retrieval locomo --out runs/locomo --baselines default
      memlane bench retrieval locomo --out runs/peers --system memlane --system mem0 --system engram
      memlane bench retrieval locomo --out runs/locomo-ann --ann-threshold 0
      memlane bench retrieval longmemeval-s --out runs/peers-s --per-category 5 --system memlane --system mem0
    """
    specs = system_specs(systems)
    options = RetrievalOptions(
        dataset=dataset,
        modes=_modes(modes) if modes or not specs else (),
        ks=parse_ks(ks),
        limit=limit,
        depth=depth,
        before_question_date=before_question_date,
        embedder=embedder,
        perspective=perspective,
        data_dir=data_dir,
        cache_dir=cache_dir,
        baselines=baseline_names(baselines, dataset),
        systems=specs,
        ann_threshold=ann_threshold,
        per_category=per_category,
    )
    outcome = run_retrieval(options, out, progress=not quiet)
    ing = outcome.ingest
    click.echo(
        f"ingest: {'warm, nothing to ingest' if ing.warm else f'{ing.ingested} namespaces ingested'} "
        f"({ing.seconds:.1f} s; store {ing.namespaces_total} namespaces, {ing.blocks_total} blocks)",
        err=True,
    )
    click.echo(
        f"retrieval: {outcome.written} records written, {outcome.already_logged} already logged, "
        f"{outcome.errors} errors, {outcome.seconds:.1f} s in all",
        err=True,
    )
    print_tables(out)


def print_tables(run_dir: Path, modes: str = "modes", *, headline: bool = True) -> None:
    """A run folder's tables: its modes side by side (``modes`` names them in the title), then each mode's
    per-category table, the report's path and, with ``headline``, the headline figures."""
    results = load_results(run_dir)
    click.echo(f"\n{results.dataset}: {modes} side by side\n\n{format_modes_table(results)}")
    for mode in results.modes:
        click.echo(f"\n{results.dataset}, {mode}:\n\n{format_mode_table(results, mode)}")
    click.echo(f"\nreport: {run_dir / 'report.md'}")
    if headline:
        click.echo(format_headline(results, run_dir / "report.md"))


@bench_group.command("ingest")
@click.argument("dataset", type=DATASET_CHOICE)
@click.option("--json", "as_json", is_flag=True, help="Print the ingest figures as one JSON object.")
@quiet_option
@ingest_options
def ingest_cmd(
    dataset: str,
    as_json: bool,
    quiet: bool,
    limit: int | None,
    perspective: str,
    embedder: str,
    cache_dir: Path | None,
    data_dir: Path | None,
) -> None:
    """Ingest DATASET into its bench store only (what `bench retrieval` does first); a rerun ingests nothing.

    \b
    Example:
      memlane bench ingest longmemeval-s --json
    """
    options = RetrievalOptions(
        dataset=dataset, limit=limit, embedder=embedder, perspective=perspective, data_dir=data_dir, cache_dir=cache_dir
    )
    stream, bench, mem = open_bench(options)
    try:
        report = ingest(stream, bench, mem, limit=limit, progress=not quiet)
    finally:
        bench.close()
    if as_json:
        click.echo(json.dumps(report.to_json() | {"store": str(bench.directory)}))
    else:
        click.echo(
            f"{dataset}: {report.ingested} namespaces ingested ({report.resumed} resumed), {report.skipped} already "
            f"there; {report.blocks} blocks, {report.texts_embedded} texts embedded, {report.seconds:.1f} s. "
            f"Store: {bench.directory} ({report.namespaces_total} namespaces, {report.blocks_total} blocks)"
        )


@bench_group.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def report_cmd(run_dir: Path) -> None:
    """Regenerate report.md, results.json/.csv, recall.png and the rankings of RUN_DIR from its log.

    \b
    Example:
      memlane bench report runs/locomo
    """
    write_reports(run_dir)
    print_tables(run_dir)


@bench_group.command("compare")
@click.argument("run_a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@setting_option(
    "--categories",
    setting="bench_compare_categories",
    is_flag=True,
    help="Also compare every category, not only overall.",
)
@click.option(
    "--all-questions",
    is_flag=True,
    help="Show each run's means over its own questions instead of over the questions both runs scored.",
)
def compare_cmd(run_a: Path, run_b: Path, categories: bool, all_questions: bool) -> None:
    """Put two runs side by side: each key figure per mode in A, in B, and B - A, with how many questions
    each run scored and the paired difference over the questions both scored (95% bootstrap interval,
    questions better / worse, sign test). A and B are means over the shared questions unless
    --all-questions.

    \b
    Example:
      memlane bench compare runs/lme-s-minilm runs/lme-s-minilm-128 --categories
    """
    click.echo(
        format_compare(load_results(run_a), load_results(run_b), categories=categories, all_questions=all_questions)
    )


@bench_group.command("view")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The HTML file to write; default view.html in the first run's folder.",
)
@click.option("--open", "open_it", is_flag=True, help="Open the page in the default web browser.")
@data_dir_option
def view_cmd(runs: tuple[Path, ...], out: Path | None, open_it: bool, data_dir: Path | None) -> None:
    """Write one self-contained HTML page (no server, no network) to look through RUNS: retrieval and QA run
    folders, any mix. It shows each run's config, data set hash and figures by category with its plot, and
    the questions, which filter by category, hit or miss and text; a question opens its gold evidence and each
    chosen system's hits, evidence marked and the question's words highlighted. Choose a second system to
    see the questions one gets and the other misses. Turn texts come from the data set (--data-dir).

    \b
    Example:
      memlane bench view runs/locomo-a runs/locomo-b --open
    """
    from memlane.bench.reports.viewer import write_view

    path = write_view(list(runs), out or runs[0] / "view.html", data_dir=data_dir)
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if open_it:
        import webbrowser

        webbrowser.open(path.resolve().as_uri())


def register(group: click.Group) -> None:
    group.add_command(bench_group)
    from memlane.interfaces.cli.baseline_cmds import register as register_baselines
    from memlane.interfaces.cli.tune_cmds import register as register_tune

    register_baselines(bench_group)
    register_tune(bench_group)
