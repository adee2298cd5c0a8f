"""memlane.core's public names: each one listed in ``__all__`` resolves, the heavy ones load on first use
only, and type checkers see the same names the package serves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memlane.core as core


def test_every_public_name_resolves_to_a_core_object() -> None:
    for name in core.__all__:
        value = getattr(core, name)
        if isinstance(value, type):  # ExtractMode is a Literal alias
            assert value.__module__.startswith("memlane.core."), name
    from memlane.core import Memory, Store  # the lazy ones also work in a from-import

    assert Memory.__name__ == "Memory" and Store.__name__ == "Store"


def test_the_listed_names_are_exactly_those_the_package_serves_and_types() -> None:
    tree = ast.parse(Path(core.__file__).read_text())
    imported: set[str] = set()
    typed: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memlane.core."):
            imported |= {a.name for a in node.names}
        if isinstance(node, ast.If):  # the TYPE_CHECKING block
            typed |= {a.name for n in node.body if isinstance(n, ast.ImportFrom) for a in n.names}
    lazy = set(core._LAZY)
    assert typed == lazy
    assert set(core.__all__) == imported | lazy
    assert len(core.__all__) == len(set(core.__all__))


def test_importing_a_small_part_of_the_core_does_not_load_memory() -> None:
    probe = "import sys, memlane.core.errors; print('memlane.core.memory' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
