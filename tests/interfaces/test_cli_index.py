"""A short-lived process that searches a large user never aborts, and a CLI user past the approximate
index's threshold gets a saved index from `memlane index build`, which later searches use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlane.core.embedding.protocol import Embedder
from memlane.core.memory import AddRequest, Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.core.store.sqlite.ann import folder

CLI = "import sys; from memlane.interfaces.cli import main; sys.argv[0] = 'memlane'; main()"
USER = "annu"


def env_for(store: Path, **extra: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")},
        **({"MEMLANE_CACHE_DIR": os.environ["MEMLANE_CACHE_DIR"]} if "MEMLANE_CACHE_DIR" in os.environ else {}),
        "MEMLANE_STORE": str(store),
        **extra,
    }


@pytest.fixture
def large_user(tmp_path: Path, minilm: Embedder) -> Path:
    """The issue's user: 400 adds of one message each, with the real model (whose process takes long enough
    to end that a build started by its search was still running: 8 aborts in 8 runs on the code before)."""
    store = tmp_path / "m.db"
    mem = Memory(SqliteStore(store), minilm)
    try:
        mem.add_many(
            [
                AddRequest(USER, [{"role": "user", "content": f"message number {i} about topic {i % 10}"}])
                for i in range(400)
            ]
        )
    finally:
        mem.close()
    return store


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLI, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_cli_search_past_the_threshold_never_aborts(large_user: Path) -> None:
    env = env_for(large_user, MEMLANE_ANN_THRESHOLD="50")
    for _ in range(4):
        proc = run_cli(["search", USER, "topic 5", "-k", "3"], env)
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
        assert "terminate called" not in proc.stderr and "topic 5" in proc.stdout
    # A command does not start a build it would not live to finish: no index was begun.
    assert not folder(large_user).exists()


SCRIPT = """
import sys
from memlane.core.memory import Memory
from memlane.core.store.candidates.annsettings import AnnSettings
mem = Memory.open(sys.argv[1], create=False, ann=AnnSettings(threshold=50))
print(len(mem.search("annu", "topic 5", k=3)))
"""


def test_interpreter_exit_during_a_background_build_is_clean(large_user: Path) -> None:
    """A script that searches once and ends, with background builds on (the Python API's default): the
    build it started is stopped between batches at exit, and the process ends normally."""
    for _ in range(4):
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(large_user)], env=env_for(large_user), capture_output=True, text=True
        )
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
        assert proc.stdout.strip() == "3" and "terminate called" not in proc.stderr


def test_index_build_gives_a_cli_user_a_saved_index_that_later_commands_use(
    large_user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import sqlite3

    from memlane.interfaces.cli.app import open_memory

    env = env_for(large_user, MEMLANE_ANN_THRESHOLD="50")
    proc = run_cli(["index", "status", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "threshold": 50,
        "users": [{"user": USER, "keys": 800, "needed": True, "state": "none", "indexed": 0, "tail": 0, "deleted": 0}],
    }
    bad = run_cli(["index", "build"], env)
    assert bad.returncode == 2 and "give a USER or --all" in bad.stderr
    assert run_cli(["index", "build", "nobody"], env).returncode == 3

    proc = run_cli(["index", "build", USER], env)
    assert proc.returncode == 0, proc.stderr
    assert f"{USER}\t800 keys\tready\t800 indexed" in proc.stdout and "Traceback" not in proc.stderr
    with sqlite3.connect(large_user) as conn:
        saved = conn.execute("SELECT file, generation FROM ann_index").fetchall()
    assert [g for _, g in saved] == [1] and (folder(large_user) / saved[0][0]).is_file()

    proc = run_cli(["search", USER, "topic 5", "-k", "3"], env)
    assert proc.returncode == 0 and "topic 5" in proc.stdout, proc.stderr
    with sqlite3.connect(large_user) as conn:
        assert conn.execute("SELECT file, generation FROM ann_index").fetchall() == saved  # used, not rebuilt

    # What a command's search does with it: the saved index is loaded, and no build is started.
    monkeypatch.setenv("MEMLANE_ANN_THRESHOLD", "50")
    mem = open_memory(str(large_user), "minilm")
    try:
        assert isinstance(mem.store, SqliteStore) and not mem.store.ann_settings.build
        assert "topic 5" in mem.search(USER, "topic 5", k=3)[0].block.message
        assert mem.store.ann.state(1)["loaded"] and mem.store.ann.state(1)["generation"] == 1
    finally:
        mem.close()
    proc = run_cli(["index", "build", "--all"], env)  # already current: nothing to add
    assert proc.returncode == 0 and "ready\t800 indexed" in proc.stdout, proc.stderr
