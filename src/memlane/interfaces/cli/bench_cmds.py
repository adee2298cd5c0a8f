"""``memlane bench ...``: the harness's commands."""

from __future__ import annotations

import json
from dataclasses import replace

import click

from memlane.bench.perf import PerfSettings, format_report, run_perf
from memlane.core.embedding.protocol import make_embedder


@click.group("bench")
def bench_group() -> None:
    """Benchmarks: performance of the core, retrieval and QA quality on LoCoMo and LongMemEval."""


@bench_group.command("perf")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the figures.")
@click.option(
    "--embedder", envvar="MEMLANE_EMBEDDER", default="minilm", show_default=True, help="[env MEMLANE_EMBEDDER]"
)
@click.option(
    "--sizes",
    default="1000,10000,100000",
    show_default=True,
    envvar="MEMLANE_PERF_SIZES",
    help="Blocks per user for the search figures. [env MEMLANE_PERF_SIZES]",
)
@click.option("--queries", type=int, default=100, show_default=True, help="Search queries per size and mode.")
def perf_cmd(as_json: bool, embedder: str, sizes: str, queries: int) -> None:
    """Measure ingest latency, bulk throughput and search latency on the embedded default.

    \b
    Example:
      memlane bench perf --json
    """
    try:
        size_list = tuple(int(s) for s in sizes.split(",") if s.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {sizes!r}", param_hint="--sizes") from None
    settings = replace(PerfSettings(), sizes=size_list, queries=queries)
    emb = make_embedder(embedder)
    figures = run_perf(emb, settings, progress=lambda m: click.echo(f"... {m}", err=True))
    if as_json:
        click.echo(json.dumps({k: round(v, 3) for k, v in figures.items()}))
    else:
        click.echo(format_report(figures))


def register(group: click.Group) -> None:
    group.add_command(bench_group)
