"""``recall.png``: overall recall against k, one line per search mode, session and turn level side by side."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from memlane.bench.report import RunResults
from memlane.bench.retrieval_metrics import OVERALL
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
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=max(1, len(labels) // 2))
    fig.suptitle(f"{results.dataset}: recall vs k ({results.contents.header.config.embedder})")
    # Leave room below the plots for the legend.
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
