"""``memlane datasets``: the data sets memlane knows, where each is found, and checks of their files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from memlane.bench.datasets.catalog import CATALOG, ENV_VAR, DatasetInfo
from memlane.bench.datasets.registry import Located, Verification, find_dataset, verify_file

data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Folder with the data sets (locomo/, longmemeval/): it replaces ${ENV_VAR}; the copies that ship "
    f"with memlane (LoCoMo) are used when it lacks one. [env {ENV_VAR}]",
)


def _info_json(info: DatasetInfo, found: Located | None) -> dict[str, object]:
    return {
        "name": info.name,
        "title": info.title,
        "description": info.description,
        "found": str(found.path) if found else None,
        "origin": found.origin if found else None,
        "files": [
            {"name": f.name, "size": f.size, "sha256": f.sha256, "content_sha256": f.content_sha256, "note": f.note}
            for f in info.files
        ],
        "licence": info.licence,
        "source": info.source,
        "url": info.url,
        "shipped": info.shipped is not None,
    }


def _describe(info: DatasetInfo, found: Located | None) -> list[str]:
    if found is None:
        state = "missing"
    elif found.origin == "shipped":
        state = f"{found.path} (the copy shipped with memlane)"
    else:
        state = f"{found.path} (from {found.origin})"
    lines = [f"{info.name}: {info.title}, {info.description}", f"  found:   {state}"]
    for f in info.files:
        size = f"{f.size:,} bytes" if f.size else "size not published"
        digest = f"sha256 {f.sha256}" if f.sha256 else "no published sha256"
        lines.append(f"  file:    {f.name}  {size}  {digest}" + (f"  ({f.note})" if f.note else ""))
    lines += [f"  licence: {info.licence}", f"  source:  {info.source}", f"           {info.url}"]
    return lines


@click.group("datasets", invoke_without_command=True)
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_context
def datasets_group(ctx: click.Context, data_dir: Path | None, as_json: bool) -> None:
    """List every data set memlane knows: where it is found now (or that it is missing), its files with
    their published size and sha256, its licence and where to get it.

    A data set is looked for in --data-dir, else in $MEMLANE_DATA, then in the copies that ship with memlane
    (LoCoMo). The larger files are not shipped: download them from the source named and point --data-dir or
    MEMLANE_DATA at their folder.

    \b
    Example:
      memlane datasets
      MEMLANE_DATA=~/data memlane datasets verify
    """
    if ctx.invoked_subcommand is not None:
        return
    rows = [(info, find_dataset(info.name, data_dir)) for info in CATALOG.values()]
    if as_json:
        click.echo(json.dumps([_info_json(info, found) for info, found in rows], indent=2))
        return
    for i, (info, found) in enumerate(rows):
        if i:
            click.echo()
        click.echo("\n".join(_describe(info, found)))


def _verdict(v: Verification) -> str:
    name = f"{v.known.name} ({v.dataset})" if v.known else (v.dataset or "no known data set")
    if v.status == "matches":
        return f"{v.path}: ok, the published {name}; content sha256 {v.content_sha256}"
    if v.status == "differs":
        return f"{v.path}: DIFFERS from the published {name}: content sha256 {v.content_sha256}, published {v.expected}"
    return f"{v.path}: no published digest for {name} to compare with; content sha256 {v.content_sha256}"


@datasets_group.command("verify")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of results.")
def verify_cmd(path: Path | None, data_dir: Path | None, as_json: bool) -> None:
    """Check a data set file (PATH), or every data set found, against the published sha256.

    Exit 0 when every file checked matches (or has no published digest), 1 when one differs, 3 when PATH
    does not exist.

    \b
    Example:
      memlane datasets verify ~/data/locomo/locomo10.json
    """
    if path is not None:
        results = [verify_file(path)]
    else:
        found = [find_dataset(name, data_dir) for name in CATALOG]
        # x500 reads the S file: check each file once.
        paths: dict[Path, str] = {}
        for f in found:
            if f is not None:
                paths.setdefault(f.path, f.name)
        results = [verify_file(p, name) for p, name in paths.items()]
    if as_json:
        rows = [
            {
                "path": str(v.path),
                "dataset": v.dataset,
                "status": v.status,
                "sha256": v.sha256,
                "content_sha256": v.content_sha256,
                "expected_content_sha256": v.expected,
            }
            for v in results
        ]
        click.echo(json.dumps(rows, indent=2))
    else:
        for v in results:
            click.echo(_verdict(v))
    if any(v.status == "differs" for v in results):
        sys.exit(1)


def register(group: click.Group) -> None:
    group.add_command(datasets_group)
