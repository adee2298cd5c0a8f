"""A plain install (without the ``server`` and ``bench`` extras): ``memlane add`` and ``search`` work, and
``serve``, ``mcp``, ``bench`` and ``datasets`` say which extra to install (exit 2, no traceback). The
packages of the extras are hidden by running the CLI over a copy of site-packages without them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from memlane.interfaces.cli.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
# The modules an extra installs beyond its own packages' names (mcp's types ship as mcp_types).
ALSO_HIDDEN = ("mcp_types", "sse_starlette")


def _plain_site(tmp: Path) -> Path:
    """site-packages as links, without the extras' modules and their metadata."""
    hidden = {m for _, modules in EXTRAS.values() for m in modules} | set(ALSO_HIDDEN)
    dists = {d.replace("-", "_").lower() for _, modules in EXTRAS.values() for d in modules.values()}
    site = tmp / "site"
    site.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        stem = entry.name.split(".")[0].lower()
        dist = re.split(r"-\d", entry.name)[0].lower()
        if stem in hidden or (entry.name.endswith(".dist-info") and dist in dists):
            continue
        (site / entry.name).symlink_to(entry)
    return site


def _memlane(site: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # -S: no site-packages of the venv; the plain copy is added as a site dir (its .pth files included).
    boot = (
        f"import site, sys; site.addsitedir({str(site)!r}); "
        "from memlane.interfaces.cli import main; sys.argv[0] = 'memlane'; main()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_") or k == "MEMLANE_CACHE_DIR"}
    return subprocess.run(
        [sys.executable, "-S", "-c", boot, *args], input=stdin, capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
def test_a_plain_install_adds_and_searches_and_names_the_extra_a_command_needs(tmp_path: Path) -> None:
    site = _plain_site(tmp_path)
    store = str(tmp_path / "m.db")
    probe = _memlane(site, "--help")
    assert probe.returncode == 0, probe.stderr
    added = _memlane(
        site,
        "add",
        "alice",
        "--store",
        store,
        "--embedder",
        "hashing",
        stdin='[{"role":"user","content":"I moved to Ghent."}]',
    )
    assert added.returncode == 0, added.stderr
    found = _memlane(site, "search", "alice", "Ghent", "--store", store, "--embedder", "hashing")
    assert found.returncode == 0 and "Ghent" in found.stdout, found.stderr
    for command, extra in (("serve", "server"), ("mcp", "server"), ("bench", "bench"), ("datasets", "bench")):
        done = _memlane(site, command, "--port", "0")
        assert done.returncode == 2, (command, done.stderr)
        assert f"pip install 'memlane[{extra}]'" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_extras_named_in_the_cli_are_those_of_pyproject() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, (_, modules) in EXTRAS.items():
        declared = {re.split(r"[<>=\[;]", req)[0].strip().lower() for req in extras[extra]}
        assert declared == set(modules.values()), extra
