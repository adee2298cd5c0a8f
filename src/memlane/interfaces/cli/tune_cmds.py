"""``memlane bench tune``: a grid over search settings, scored on the dev split of one or more data sets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from memlane.bench.retrieval.paired import format_diff
from memlane.bench.retrieval.run import RetrievalOptions
from memlane.bench.retrieval.runlog import DEFAULT_EMBEDDER
from memlane.bench.retrieval.tune import (
    DEFAULT_METRICS,
    TUNABLE,
    GridResult,
    collect,
    objective_terms,
    paired_against,
    run_grid,
)
from memlane.core.errors import ConfigError
from memlane.core.retrieval import PRESETS
from memlane.interfaces.cli.bench_cmds import DATASET_CHOICE
from memlane.interfaces.cli.dataset_cmds import data_dir_option
from memlane.interfaces.cli.options import SettingOption, bench_cache_option


def _grid(values: tuple[str, ...]) -> dict[str, list[float | str]]:
    grid: dict[str, list[float | str]] = {}
    for item in values:
        name, sep, listed = item.partition("=")
        name = name.strip()
        if not sep or not name or not listed.strip():
            raise click.BadParameter(f"expected name=v1,v2,..., got {item!r}", param_hint="--set")
        if name not in TUNABLE:
            raise click.BadParameter(f"cannot tune {name!r}; tunable: {', '.join(TUNABLE)}", param_hint="--set")
        if name in grid:
            raise click.BadParameter(f"{name} is set twice", param_hint="--set")
        if name == "fusion":
            grid[name] = [v.strip() for v in listed.split(",") if v.strip()]
            continue
        try:
            grid[name] = [float(v) for v in listed.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"{name}: values must be numbers, got {listed!r}", param_hint="--set") from None
    return grid


def _value(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def _row(label: str, result: GridResult, names: list[str], terms: list[tuple[str, str]]) -> str:
    cells = [label, f"{result.objective:.3f}"]
    cells += [_value(getattr(result.settings, n)) for n in names]
    cells += ["-" if math.isnan(result.figures[d][m]) else f"{result.figures[d][m]:.3f}" for d, m in terms]
    return "| " + " | ".join(cells) + " |"


@click.command("tune")
@click.argument("datasets", nargs=-1, required=True, type=DATASET_CHOICE)
@click.option(
    "--set",
    "values",
    multiple=True,
    metavar="NAME=V1,V2",
    help=f"Values of one setting to try (repeatable; the grid is every combination). Tunable: {', '.join(TUNABLE)}.",
)
@click.option(
    "--base",
    default="hybrid",
    show_default=True,
    help="Preset whose other settings every grid point keeps.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help="Metric to sum into the objective (repeatable): on every data set, or on one as DATASET:metric; "
    f"default {', '.join(DEFAULT_METRICS)}.",
)
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to print.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N questions per data set.")
@click.option("--embedder", default=DEFAULT_EMBEDDER, show_default=True, cls=SettingOption, setting="bench_embedder")
@bench_cache_option()
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print every grid point as one JSON object per line.")
def tune_cmd(
    datasets: tuple[str, ...],
    values: tuple[str, ...],
    base: str,
    metrics: tuple[str, ...],
    split: str,
    top: int,
    limit: int | None,
    embedder: str,
    cache_dir: Path | None,
    data_dir: Path | None,
    as_json: bool,
) -> None:
    """Score a grid of search settings on the dev questions of DATASETS, best objective first.

    Each question is searched once; every grid point re-ranks its candidates with the code Memory.search
    runs, so a point's figures are those of `bench retrieval` with that setting. The base preset is the
    first row for reference.

    \b
    Example (how the default hybrid preset was chosen, docs/design/003-retrieval.md):
      memlane bench tune locomo longmemeval-s longmemeval-s-x500 --set vector_weight=0.35,0.45,0.55,0.7,0.85 \\
        --set session_weight=0.1,0.2,0.3,0.4 --set neighbour_weight=0.1,0.2,0.3,0.4 --set session_top=2,3 \\
        --metric locomo:turn/recall_all@10 --metric longmemeval-s:session/recall_all@5 \\
        --metric longmemeval-s:session/recall_all@10 --metric longmemeval-s:turn/recall_all@10 \\
        --metric longmemeval-s-x500:session/recall_all@10

    --set fusion=rrf,score compares the two fusion rules in one grid (rrf_k matters to rrf only).
    """
    if base not in PRESETS:
        raise click.BadParameter(f"unknown preset {base!r}; presets: {', '.join(PRESETS)}", param_hint="--base")
    grid = _grid(values)
    chosen = list(dict.fromkeys(metrics)) or list(DEFAULT_METRICS)
    try:
        devs = [
            collect(
                RetrievalOptions(dataset=d, embedder=embedder, data_dir=data_dir, cache_dir=cache_dir),
                split=split,
                limit=limit,
                bm25=(PRESETS[base].bm25_k1, PRESETS[base].bm25_b),
            )
            for d in dict.fromkeys(datasets)
        ]
        terms = objective_terms(devs, chosen)
        reference = run_grid(devs, PRESETS[base], {}, chosen)[0]
        results = run_grid(devs, PRESETS[base], grid, chosen)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    names = list(grid)
    if as_json:
        for r in [reference, *results]:
            click.echo(json.dumps({"settings": r.settings.to_json(), "objective": r.objective, "figures": r.figures}))
        return
    sizes = ", ".join(f"{d.dataset} {int(reference.figures[d.dataset]['n'])}" for d in devs)
    click.echo(f"{len(results)} grid points on the {split} split ({sizes} questions scored)\n")
    header = ["#", "objective", *names, *(f"{d} {m}" for d, m in terms)]
    click.echo("| " + " | ".join(header) + " |")
    click.echo("|" + "---:|" * len(header))
    click.echo(_row(base, reference, names, terms))
    for i, result in enumerate(results[:top], start=1):
        click.echo(_row(str(i), result, names, terms))
    if results:
        by_name = {d.dataset: d for d in devs}
        click.echo(f"\nPoint 1 against {base}, question by question (mean difference [95% interval], questions")
        click.echo("better / worse, sign test p):")
        for d, m in terms:
            diff = paired_against(by_name[d], reference.settings, results[0].settings, m)
            click.echo(f"- {d} {m}: {format_diff(diff)}")


def register(group: click.Group) -> None:
    """Add ``tune`` to the ``bench`` group."""
    group.add_command(tune_cmd)
