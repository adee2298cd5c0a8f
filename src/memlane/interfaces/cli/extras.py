"""The optional extras of the ``memlane`` package, and the commands that need them.

A plain ``pip install memlane`` is the embedded memory (the Python API and the CLI's add, search and the
other store commands). ``memlane[server]`` adds the HTTP and MCP servers (``serve``, ``mcp``) and
``memlane[bench]`` the benchmarks (``bench``, ``datasets``). Without its extra, such a command is still
listed and says which extra to install, rather than failing on an import.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

import click

# Each extra: what it brings, and the modules it installs (module name: the distribution that ships it, as
# named in pyproject.toml).
EXTRAS: dict[str, tuple[str, dict[str, str]]] = {
    "server": (
        "the HTTP service and the MCP server",
        {
            "fastapi": "fastapi",
            "uvicorn": "uvicorn",
            "starlette": "starlette",
            "prometheus_client": "prometheus-client",
            "mcp": "mcp",
            "swagger_ui_bundle": "swagger-ui-bundle-v2",
        },
    ),
    "bench": ("the benchmarks and their data sets", {"matplotlib": "matplotlib", "nltk": "nltk"}),
}


def missing(extra: str) -> list[str]:
    """The distributions of ``extra`` that are not installed (none: the extra is there)."""
    return [dist for module, dist in EXTRAS[extra][1].items() if find_spec(module) is None]


def needs_extra(name: str, extra: str, absent: list[str]) -> click.Command:
    """A stand-in for the command ``name`` when ``extra`` is not installed: any use of it says so, exit 2."""
    what = EXTRAS[extra][0]

    def run() -> None:
        click.echo(
            f"error: memlane {name} needs {what}, which come with the '{extra}' extra ({', '.join(absent)} "
            f"not installed): pip install 'memlane[{extra}]'",
            err=True,
        )
        sys.exit(2)

    return click.Command(
        name,
        callback=run,
        help=f"Needs pip install 'memlane[{extra}]' ({what}).",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    )
