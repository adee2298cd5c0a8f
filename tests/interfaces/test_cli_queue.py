"""`memlane worker`, `memlane queue status` and `memlane queue retry` through an LLM outage: the jobs wait
with their attempts, the status shows the outage (text and JSON), and failed jobs can be run again."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.cli.app import cli, register_all

register_all()


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, input=stdin, env=env)
    return res.exit_code, res.stdout, res.stderr


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "MEMLANE_STORE": str(tmp_path / "q.db"),
        "MEMLANE_EMBEDDER": "hashing",
        "MEMLANE_LLM_BASE_URL": f"http://127.0.0.1:{dead_port()}/v1",
        "MEMLANE_LLM_API_KEY": "x",
        "MEMLANE_LLM_MODEL": "m",
        "MEMLANE_LLM_MAX_RETRIES": "0",
    }


def jobs(tmp_path: Path) -> list[tuple[str, int, int]]:
    with sqlite3.connect(tmp_path / "q.db") as db:
        return [(str(s), int(a), int(f)) for s, a, f in db.execute("SELECT status, attempts, llm_failures FROM jobs")]


def test_an_outage_keeps_the_jobs_and_the_status_shows_it(env: dict[str, str], tmp_path: Path) -> None:
    chat = json.dumps([{"role": "user", "content": "I keep bees."}, {"role": "assistant", "content": "Nice!"}])
    assert run(["add", "alice", "--extract", "async"], env, chat)[0] == 0
    for i in range(12):  # six tries per job: more than a job's attempts (5)
        if i:
            assert run(["queue", "retry"], env)[0] == 0  # do not wait out the backoff between the runs
        code, out, err = run(["worker", "--drain", "--concurrency", "1"], env)
        assert code == 1 and "the LLM could not be reached" in err, (out, err)
        assert '"dead": 0' in out
    assert sorted(jobs(tmp_path)) == [("queued", 0, 6), ("queued", 0, 6)]

    code, out, _ = run(["queue", "status"], env)
    assert code == 0 and "LLM unreachable: 2 queued jobs wait for it" in out and "attempts are kept" in out
    code, out, _ = run(["queue", "status", "--json"], env)
    outage = json.loads(out)["llm_outage"]
    assert outage["jobs"] == 2 and outage["waiting_s"] >= 0 and "LLMTransportError" in outage["last_error"]
    assert json.loads(out)["dead"] == 0

    code, out, _ = run(["queue", "retry", "--json"], env)
    assert code == 0 and json.loads(out) == {"dead": 0, "waiting": 1}  # the job the last run tried
    assert json.loads(run(["queue", "retry", "--json"], env)[1]) == {"dead": 0, "waiting": 0}  # idempotent


def test_retry_queues_dead_jobs_again(env: dict[str, str], tmp_path: Path) -> None:
    mem = Memory(SqliteStore(tmp_path / "q.db"), HashingEmbedder(), max_attempts=1)
    for user in ("alice", "bob"):
        mem.add(user, [{"role": "user", "content": f"{user} here"}], extract="async", perspective="single")
    for job in mem.queue.claim("w", 10, 60.0):
        mem.queue.fail(job, "LLMResponseError: not json", "???", 0.0)
    mem.close()
    out = run(["queue", "status"], env)[1]
    assert "dead 2" in out and "`memlane queue retry --dead`" in out
    assert run(["queue", "retry", "--dead", "--user", "alice"], env)[1] == (
        "queued again: 1 dead jobs (attempts reset); run now: 0 waiting jobs\n"
    )
    assert json.loads(run(["queue", "retry", "--dead", "--json"], env)[1]) == {"dead": 1, "waiting": 0}
    assert json.loads(run(["queue", "retry", "--dead", "--json"], env)[1]) == {"dead": 0, "waiting": 0}
    assert sorted(jobs(tmp_path)) == [("queued", 0, 0), ("queued", 0, 0)]
    out = run(["list", "alice", "--json"], env)[1]
    assert [b["extraction_status"] for b in json.loads(out)] == ["queued"]


def test_retry_refuses_bad_input(env: dict[str, str], tmp_path: Path) -> None:
    Memory(SqliteStore(tmp_path / "q.db"), HashingEmbedder()).close()
    code, _, err = run(["queue", "retry", "--since", "last tuesday-ish"], env)
    assert code == 2 and "--since" in err and "Traceback" not in err
    code, _, err = run(["queue", "retry", "--user", "nobody"], env)
    assert code == 3 and "nobody" in err
    env = env | {"MEMLANE_STORE": str(tmp_path / "missing.db")}
    assert run(["queue", "retry"], env)[0] == 3
