"""``scripts/rescore_rankings.py`` re-scores a run's exported rankings from the raw data set file, without
memlane's metric code, and agrees with the run's ``results.json``; a tampered figure is caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench_runs import make_data_dir, options

from memlane.bench.retrieval.run import run_retrieval

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rescore_rankings.py"


def _rescore(run: Path, data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(run), "--data", str(data), "--json"], capture_output=True, text=True
    )


def test_rescoring_agrees_on_locomo_and_longmemeval_and_catches_a_change(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    for dataset, data in (
        ("locomo", tmp_path / "data" / "locomo" / "locomo10.json"),
        ("longmemeval-s", tmp_path / "data" / "longmemeval" / "longmemeval_s_cleaned.json"),
    ):
        run = tmp_path / dataset
        run_retrieval(options(tmp_path, dataset, modes=("keyword", "vector")), run, progress=False)
        done = _rescore(run, data)
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        assert set(report["modes"]) == {"keyword", "vector"}
        assert all(not m["disagree"] and m["official"] for m in report["modes"].values())
        results = json.loads((run / "results.json").read_text())
        group = "overall (1-4)" if dataset == "locomo" else "overall"
        results["modes"]["keyword"]["groups"][group]["means"]["session/recall_all@5"] -= 0.1
        (run / "results.json").write_text(json.dumps(results))
        assert _rescore(run, data).returncode == 1
