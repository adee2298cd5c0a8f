"""The rings: the core imports neither the harness nor the interfaces (nor compat and integrations, beside them);
the harness none of those."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "memlane"
OUTER = ("memlane.interfaces", "memlane.compat", "memlane.integrations")
FORBIDDEN = {
    "core": ("memlane.bench", *OUTER),
    "bench": OUTER,
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("ring", sorted(FORBIDDEN))
def test_ring_imports_point_inward(ring: str) -> None:
    files = sorted((SRC / ring).rglob("*.py"))
    assert files, f"no modules found under {ring}"
    bad = [
        f"{f.relative_to(SRC)} imports {m}" for f in files for m in imported_modules(f) if m.startswith(FORBIDDEN[ring])
    ]
    assert bad == []


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from memlane.interfaces.cli import main\nimport memlane.bench.perf\n")
    assert imported_modules(bad) == {"memlane.interfaces.cli", "memlane.bench.perf"}


def test_import_linter_contract() -> None:
    """The same rule through import-linter (pyproject's contract), which also sees indirect imports."""
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(SRC.parents[1] / "pyproject.toml")) == 0


INTERFACES = {
    "interfaces/cli": "memlane.interfaces.cli",
    "interfaces/http": "memlane.interfaces.http",
    "interfaces/mcp": "memlane.interfaces.mcp",
    "client": "memlane.client",
}
# The one way between them: the CLI's service commands start the servers through the composition module.
COMPOSITION = {("interfaces/cli/serve_cmds.py", "memlane.interfaces.serve")}


@pytest.mark.parametrize("folder", sorted(INTERFACES))
def test_interfaces_do_not_import_one_another(folder: str) -> None:
    others = (*(m for f, m in INTERFACES.items() if f != folder), "memlane.interfaces.serve")
    bad = [
        f"{f.relative_to(SRC)} imports {m}"
        for f in sorted((SRC / folder).rglob("*.py"))
        for m in imported_modules(f)
        if m.startswith(others) and (str(f.relative_to(SRC)), m) not in COMPOSITION
    ]
    assert bad == []


def test_the_core_and_the_shared_interface_module_stay_below() -> None:
    core = [f for f in sorted((SRC / "core").rglob("*.py")) if "memlane.settings" in imported_modules(f)]
    assert core == []
    wire = [
        f"{f.name} imports {m}"
        for f in sorted((SRC / "interfaces" / "wire").rglob("*.py"))
        for m in imported_modules(f)
        if m.startswith(("memlane.interfaces.", "memlane.bench", "memlane.client")) and ".wire" not in m
    ]
    assert wire == []
