"""``memlane bench retrieval|ingest|report|compare``: options by flag and by environment variable."""

from __future__ import annotations

import json
from pathlib import Path

from bench_runs import make_data_dir
from click.testing import CliRunner

from memlane.interfaces.cli.app import cli, register_all

register_all()


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, env=env)
    return res.exit_code, res.stdout, res.stderr


def test_retrieval_report_compare_and_ingest(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    env = {
        "MEMLANE_DATA": str(tmp_path / "data"),
        "MEMLANE_BENCH_CACHE": str(tmp_path / "cache"),
        "MEMLANE_BENCH_EMBEDDER": "hashing",
        "MEMLANE_BENCH_MODES": "keyword hybrid",
        "MEMLANE_BENCH_QUIET": "1",
    }
    run = tmp_path / "run"
    code, out, err = _run(
        ["bench", "retrieval", "longmemeval-s", "--out", str(run), "--limit", "3", "--k", "5,10,50"], env
    )
    assert code == 0, err
    assert "longmemeval-s, hybrid:" in out and "longmemeval-s, keyword:" in out
    assert "| single-session-user |" in out
    assert f"report: {run / 'report.md'}" in out
    assert "3 namespaces ingested" in err
    # The last line says what was measured: data set, questions, modes and their key figures, the report.
    last = out.strip().splitlines()[-1]
    hybrid = json.loads((run / "results.json").read_text())["modes"]["hybrid"]["groups"]["overall"]["means"]
    figures = [f"{hybrid[m]:.3f}" for m in ("session/recall_all@10", "turn/recall_all@10")]
    assert last.startswith("measured: longmemeval-s, 3 questions (overall), 2 modes; ")
    assert f"session R_all@10 / turn R_all@10: hybrid {figures[0]} / {figures[1]}, keyword " in last
    assert last.endswith(f"; report: {run / 'report.md'}")

    code, out, err = _run(["bench", "report", str(run)], env)
    assert code == 0, err
    assert "longmemeval-s: modes side by side" in out

    code, out, err = _run(["bench", "compare", str(run), str(run)], env)
    assert code == 0, err
    assert "| hybrid | overall | session R_all@10 |" in out and "+0.000" in out

    code, out, err = _run(["bench", "ingest", "longmemeval-s", "--json"], env)
    assert code == 0, err
    assert json.loads(out)["ingested"] == 7  # the rest of the data set; the first three are there
    code, out, err = _run(["bench", "ingest", "longmemeval-s", "--json"], env)
    assert json.loads(out)["warm"] is True


def test_bad_input_exits_with_a_message(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    env = {"MEMLANE_DATA": str(tmp_path / "data"), "MEMLANE_BENCH_CACHE": str(tmp_path / "cache")}
    code, _, err = _run(["bench", "retrieval", "locomo", "--out", str(tmp_path / "r"), "--mode", "fuzzy"], env)
    assert code == 2 and "unknown search mode 'fuzzy'" in err
    code, _, err = _run(["bench", "retrieval", "locomo", "--out", str(tmp_path / "r"), "--k", "5,x"], env)
    assert code == 2 and "--k" in err
