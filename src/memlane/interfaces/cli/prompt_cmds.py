"""``memlane prompt create | list | show | update | archive | purge``: the registry of extraction prompts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import click

from memlane.core.errors import ValidationError
from memlane.core.memory_model import PromptRegistry
from memlane.interfaces.cli.app import open_memory, store_options
from memlane.interfaces.cli.options import VERSION, page_options
from memlane.interfaces.cli.pairs import parse_pairs
from memlane.interfaces.wire.shapes import page_json, prompt_json, prompt_version_json

text_option = click.option("--text", default=None, help="The prompt's instructions; '-' reads them from stdin.")


def _text(value: str | None) -> str | None:
    if value == "-":
        return sys.stdin.read()
    return value


@click.group("prompt")
def prompt_group() -> None:
    """Named extraction prompts with immutable versions from 0. An add or update names one (--prompt
    ID[@VERSION]); its text steers what the LLM extracts, inside memlane's own extraction prompt, whose
    output (a summary and facts) stays memlane's. Blocks record the prompt and version that extracted them."""


@prompt_group.command("create")
@click.argument("prompt_id")
@text_option
@click.option("--description", default="", help="Up to 200 characters.")
@click.option("--annotation", "annotation_pairs", multiple=True, metavar="KEY=VALUE", help="A label (repeat).")
@store_options
def create_cmd(
    prompt_id: str, text: str | None, description: str, annotation_pairs: tuple[str, ...], store: Path, embedder: str
) -> None:
    """Create PROMPT_ID at version 0 and print it as JSON.

    \b
    Example:
      memlane prompt create travel --text "Extract every place and date of a trip." --description "Trips"
    """
    body = _text(text)
    if not body:
        raise ValidationError("the prompt's text is required (or '-' for stdin)", where="--text")
    annotations = parse_pairs(annotation_pairs, "--annotation")
    with closing(open_memory(store, embedder, create=True)) as mem:
        prompt = mem.prompts.create(prompt_id, body, description=description, annotations=annotations)
    click.echo(json.dumps(prompt_json(prompt), ensure_ascii=False, indent=2))


@prompt_group.command("list")
@click.option("--archived", "include_archived", is_flag=True, help="Archived prompts too.")
@page_options
@store_options
def list_cmd(include_archived: bool, limit: int, offset: int, as_json: bool, store: Path, embedder: str) -> None:
    """The prompts: id, current version, number of versions, description.

    \b
    Example:
      memlane prompt list --json
    """
    with closing(open_memory(store, embedder)) as mem:
        page = mem.prompts.list(limit=limit, offset=offset, include_archived=include_archived)
    if as_json:
        click.echo(json.dumps(page_json(page, prompt_json), ensure_ascii=False))
        return
    for p in page.items:
        state = " (archived)" if p.archived else ""
        click.echo(f"{p.prompt_id}\tv{p.current_version}\t{p.version_count} versions{state}\t{p.description}")


@prompt_group.command("show")
@click.argument("prompt_id")
@click.option("--version", type=VERSION, default=None, help="One version (default: the head).")
@click.option("--versions", "all_versions", is_flag=True, help="Every version.")
@store_options
def show_cmd(prompt_id: str, version: int | None, all_versions: bool, store: Path, embedder: str) -> None:
    """Print a prompt (its head and current text), one version, or all its versions as JSON.

    \b
    Example:
      memlane prompt show travel --version 0
    """
    if version is not None and all_versions:
        raise ValidationError("cannot be combined with --versions", where="--version")
    with closing(open_memory(store, embedder)) as mem:
        if all_versions:
            out = page_json(mem.prompts.versions(prompt_id, limit=10_000, offset=0), prompt_version_json)
        elif version is not None:
            out = prompt_version_json(mem.prompts.version(prompt_id, version))
        else:
            out = prompt_json(mem.prompts.get(prompt_id))
    click.echo(json.dumps(out, ensure_ascii=False, indent=2))


@prompt_group.command("update")
@click.argument("prompt_id")
@text_option
@click.option("--description", default=None, help="A new description (up to 200 characters).")
@click.option("--annotation", "annotation_pairs", multiple=True, metavar="KEY=VALUE", help="Replace its labels.")
@store_options
def update_cmd(
    prompt_id: str,
    text: str | None,
    description: str | None,
    annotation_pairs: tuple[str, ...],
    store: Path,
    embedder: str,
) -> None:
    """New --text adds a version that becomes current; --description and --annotation change the head.

    \b
    Example:
      memlane prompt update travel --text "Extract places, dates and who travelled."
    """
    annotations = parse_pairs(annotation_pairs, "--annotation")
    with closing(open_memory(store, embedder)) as mem:
        prompt = mem.prompts.update(prompt_id, text=_text(text), description=description, annotations=annotations)
    click.echo(json.dumps(prompt_json(prompt), ensure_ascii=False, indent=2))


def _version_command(
    name: str, call: Callable[[PromptRegistry, str, int | None], object], done: str, version_help: str, doc: str
) -> None:
    """``prompt archive`` and ``prompt purge``: ``call`` on a prompt, or on one of its versions, and the same
    report; ``done`` is the verb of that report."""

    @prompt_group.command(name, help=doc)
    @click.argument("prompt_id")
    @click.option("--version", type=VERSION, default=None, help=version_help)
    @store_options
    def command(prompt_id: str, version: int | None, store: Path, embedder: str) -> None:
        with closing(open_memory(store, embedder)) as mem:
            call(mem.prompts, prompt_id, version)
        click.echo(f"{done} {prompt_id}" + ("" if version is None else f" version {version}"))


_version_command(
    "archive",
    PromptRegistry.archive,
    "archived",
    "Only this version.",
    """Archive a prompt (its id stays reserved; it can no longer be used or updated) or one version.

    \b
    Example:
      memlane prompt archive travel
    """,
)
_version_command(
    "purge",
    PromptRegistry.purge,
    "purged",
    "Only this version (not the current one).",
    """Delete a prompt for good, freeing its id, or one version that is not the current one.

    \b
    Example:
      memlane prompt purge travel
    """,
)


def register(group: click.Group) -> None:
    group.add_command(prompt_group)
