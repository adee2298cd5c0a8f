"""``recall.png``: overall recall against k, one line per search mode, session and turn level side by side."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from memlane.bench.reports.results import RunResults
from memlane.bench.retrieval.metrics import OVERALL
from memlane.core.errors import ConfigError

LEVELS = ("session", "turn")
_MISSING = "the recall plot needs matplotlib (pip install matplotlib)"


def check_plotting() -> None:
    """Fail before a long run, not after it, when matplotlib is missing."""
    if find_spec("matplotlib") is None:
        raise ConfigError(_MISSING)


def write_recall_plot(results: RunResults, path: Path) -> None:
    """Plot ``<level>/recall_all@k`` (solid) and ``recall_any@k`` (dashed) of every mode against k."""
    try:
        import matplotlib

        # Agg renders to files only: no display needed, and no GUI toolkit is ever imported.
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError(f"{_MISSING}: {exc}") from exc
    ks = results.contents.header.config.ks
    fig, axes = plt.subplots(1, len(LEVELS), figsize=(11, 5), sharey=True)
    for ax, level in zip(axes, LEVELS, strict=True):
        for i, (mode, result) in enumerate(results.modes.items()):
            overall = result.groups.get(OVERALL)
            if overall is None:
                continue
            color = f"C{i}"
            for kind, style in (("recall_all", "-"), ("recall_any", "--")):
                points = [
                    (k, overall.means[f"{level}/{kind}@{k}"]) for k in ks if f"{level}/{kind}@{k}" in overall.means
                ]
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, style, marker="o", markersize=3, color=color, label=f"{mode} {kind}")
        ax.set_xscale("log")
        ax.set_xticks(list(ks), [str(k) for k in ks])
        ax.set_xlabel("k")
        ax.set_title(f"{level} level")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("recall (overall)")
    # One entry per mode (its colour) and one per line style, to the right of the plots: with the baselines a
    # run has a dozen modes, and an entry per (mode, metric) pair would not fit under them.
    from matplotlib.lines import Line2D

    modes = [
        Line2D([], [], color=f"C{i}", marker="o", markersize=3, label=mode) for i, mode in enumerate(results.modes)
    ]
    styles = [
        Line2D([], [], color="0.3", linestyle="-", label="recall_all (solid)"),
        Line2D([], [], color="0.3", linestyle="--", label="recall_any (dashed)"),
    ]
    fig.legend(handles=[*modes, *styles], fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle(f"{results.dataset}: recall vs k ({results.contents.header.config.embedder})")
    fig.tight_layout()
    # "tight" grows the canvas to hold the legend beside the plots instead of clipping it.
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
