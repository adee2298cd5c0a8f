"""The ``memlane`` command: a thin mirror of the Python API (``memlane <noun> <verb>``)."""

from memlane.interfaces.cli.app import cli, main

__all__ = ["cli", "main"]
