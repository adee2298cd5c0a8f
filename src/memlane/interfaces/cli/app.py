"""Command group, shared options and error translation."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from memlane.core.errors import MemlaneError, NotFoundError, ValidationError
from memlane.core.memory import Memory

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_STORE = "memlane.db"


def store_options(func: F) -> F:
    """``--store`` and ``--embedder``, each with its environment variable."""
    func = click.option(
        "--embedder",
        envvar="MEMLANE_EMBEDDER",
        default="minilm",
        show_default=True,
        help="Embedder by name: minilm (offline ONNX), hashing (test fake), openai. [env MEMLANE_EMBEDDER]",
    )(func)
    func = click.option(
        "--store",
        envvar="MEMLANE_STORE",
        default=DEFAULT_STORE,
        show_default=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Path of the SQLite store. [env MEMLANE_STORE]",
    )(func)
    return func


def open_memory(store: Path, embedder: str) -> Memory:
    return Memory.open(store, embedder=embedder)


class MemlaneGroup(click.Group):
    """Translates memlane's errors into a one-line message and an exit code (2: bad input, 1: failure)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except NotFoundError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(3)
        except MemlaneError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=MemlaneGroup)
@click.version_option(package_name="memlane")
def cli() -> None:
    """memlane: persistent per-user memory for LLM agents.

    \b
    Example:
      echo '[{"role":"user","content":"I moved to Ghent."}]' | memlane add alice --time 2023-05-08
      memlane search alice "where do I live?" --json
    """


def main() -> None:
    from memlane.interfaces.cli.bench_cmds import register as register_bench
    from memlane.interfaces.cli.memory_cmds import register as register_memory

    register_memory(cli)
    register_bench(cli)
    cli()
