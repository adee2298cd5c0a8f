"""``memlane bench view``: one self-contained HTML page over one or more run folders.

The page carries its data, script and styles inline (no server, no network, no CDN), so it opens from disk
and can be sent to someone else. It shows each run's config, data set hash and figures by category with its
plot, and a question list that filters by category, by hit or miss and by text; a question opens its gold
evidence and what each chosen system returned, evidence marked and the question's words highlighted; with a
second system chosen, the questions one gets and the other misses (over the questions both answered).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from memlane.bench.reports.viewer.model import build_model

__all__ = ["build_model", "render_page", "write_view"]


def render_page(model: dict[str, Any], title: str) -> str:
    """The HTML page for ``model``: the viewer template with the data embedded."""
    template = resources.files(__name__).joinpath("viewer.html").read_text(encoding="utf-8")
    # Gzipped and base64-encoded (the page inflates it with the browser's DecompressionStream): a LoCoMo
    # run with every preset and baseline is 12 MB of JSON, 1-2 MB this way.
    raw = json.dumps(model, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    data = base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")
    return template.replace("__TITLE__", html.escape(title)).replace("__DATA__", data)


def write_view(run_dirs: list[Path], out: Path, *, data_dir: Path | None = None) -> Path:
    """Write the page for ``run_dirs`` to ``out`` (written aside, then renamed) and return its path."""
    model = build_model(run_dirs, data_dir=data_dir)
    names = ", ".join(str(r["name"]) for r in model["runs"])
    page = render_page(model, f"memlane runs: {names}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
