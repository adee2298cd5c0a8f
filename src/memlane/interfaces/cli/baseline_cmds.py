"""``memlane bench baselines``: the simple retrievers memlane is compared against, as a standard run folder."""

from __future__ import annotations

from pathlib import Path

import click

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL
from memlane.bench.retrieval.baselines import BASELINES, BaselineOptions, run_baselines
from memlane.bench.retrieval.runlog import DEFAULT_EMBEDDER
from memlane.interfaces.cli.bench_cmds import DATASET_CHOICE, baseline_names, ks_option, print_tables
from memlane.interfaces.cli.dataset_cmds import data_dir_option
from memlane.interfaces.cli.options import (
    bench_cache_option,
    out_option,
    parse_ks,
    quiet_option,
    setting_option,
)


@click.command("baselines")
@click.argument("dataset", type=DATASET_CHOICE)
@out_option(
    "Run folder (log.jsonl, rankings*.jsonl, report.md, results.json/.csv, recall.png), read by "
    "`bench report` and `bench compare`. An existing log there with the same settings is resumed. "
)
@setting_option(
    "--baselines",
    "names",
    setting="bench_baselines",
    default=None,
    help=f"Comma-separated baselines of {', '.join(BASELINES)}. Default: "
    f"{','.join(LONGMEMEVAL.baselines)} on LongMemEval, {','.join(LOCOMO.baselines)} "
    "on LoCoMo.",
)
@ks_option
@setting_option(
    "--limit", setting="bench_limit", type=click.IntRange(min=1), default=None, help="Only the first N questions."
)
@setting_option(
    "--embedder",
    setting="bench_embedder",
    default=DEFAULT_EMBEDDER,
    show_default=True,
    help="Embedder of the cosine baselines (minilm-128, minilm, hashing, openai).",
)
@bench_cache_option(
    "Where the shared embedding cache (embeddings.db) lives; default "
    "<MEMLANE_CACHE_DIR or ~/.cache/memlane>/bench. [env MEMLANE_BENCH_CACHE]"
)
@data_dir_option
@quiet_option
def baselines_cmd(
    dataset: str,
    out: Path,
    names: str | None,
    ks: str,
    limit: int | None,
    embedder: str,
    cache_dir: Path | None,
    data_dir: Path | None,
    quiet: bool,
) -> None:
    """Baseline retrievers (BM25, MiniLM cosine, their RRF, BM25 on rounds/turns) on DATASET, no memlane store.

    Writes a standard run folder whose modes are the baselines, so `bench report` and `bench compare` read
    it like a `bench retrieval` run. Prints each baseline's per-category table.

    \b
    Example:
      memlane bench baselines longmemeval-s --out runs/baselines-lme-s
      memlane bench baselines locomo --out runs/baselines-locomo --baselines bm25-turns
    """
    options = BaselineOptions(
        dataset=dataset,
        baselines=baseline_names(names),
        ks=parse_ks(ks),
        limit=limit,
        embedder=embedder,
        data_dir=data_dir,
        cache_dir=cache_dir,
    )
    outcome = run_baselines(options, out, progress=not quiet)
    click.echo(
        f"baselines: {outcome.written} records written, {outcome.already_logged} already logged; "
        f"{outcome.texts_embedded} texts embedded; indexing {outcome.index_seconds:.1f} s, "
        f"{outcome.seconds:.1f} s in all",
        err=True,
    )
    print_tables(out, "baselines", headline=False)


def register(group: click.Group) -> None:
    """Add ``baselines`` to the ``bench`` group."""
    group.add_command(baselines_cmd)
