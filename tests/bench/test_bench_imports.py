"""Every module of the harness imports on its own: no import cycle hides behind the order tests import in.

The data set families point at the scorers and the QA aggregates, and those modules must not import the
families (or the catalog, which imports them) back: whichever module is imported first, it must work.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Imports each module with every memlane module forgotten first (third-party ones stay loaded: fast).
PROBE = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "memlane" or m.startswith("memlane.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def bench_modules() -> list[str]:
    root = SRC / "memlane" / "bench"
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_bench_module_imports_first() -> None:
    modules = bench_modules()
    assert "memlane.bench.datasets.families" in modules and len(modules) > 40
    out = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
