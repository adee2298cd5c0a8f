"""``bench qa --system``: the same reader and judge answer over a system's memory (its search is the
context), with the scripted LLM the QA tests use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from qa_run_support import answerer, judge, make_data_dir, qa_options

from memlane.bench.datasets.model import Session
from memlane.bench.qa.qalog import read_qa_log
from memlane.bench.qa.run import run_qa
from memlane.bench.systems import SYSTEMS, Hit, System, SystemContext, parse_system_spec, register_system
from memlane.bench.systems.mem0 import mem0_version
from memlane.core.errors import ConfigError
from memlane.core.llm import ScriptedLLM
from memlane.interfaces.cli.app import cli, register_all

register_all()


class LastTurns:
    """A fake system: its items are the user's last three turns, newest first, whatever the query."""

    name = "last-turns"
    version = "1"
    ranks_turns = True
    cuts_rankings = False

    def __init__(self) -> None:
        self.sessions: dict[str, list[Session]] = {}
        self.ingested: list[str] = []

    def settings(self) -> dict[str, object]:
        return {"system": self.name}

    def ingest(self, user: str, sessions: Sequence[Session]) -> None:
        self.ingested.append(user)
        self.sessions[user] = list(sessions)

    def search(self, user: str, query: str, k: int, at: datetime | None) -> list[Hit]:
        turns = [(s.session_id, t) for s in self.sessions[user] for t in s.turns][::-1][:3]
        return [Hit(t.turn_id, 1.0, sid, (t.turn_id,), f"{t.role}: {t.content}") for sid, t in turns]

    def reset(self, user: str) -> None:
        self.sessions.pop(user, None)

    def close(self) -> None:
        pass


MADE: list[LastTurns] = []


def _factory(opts: Mapping[str, str], context: SystemContext) -> System:
    MADE.append(LastTurns())
    return MADE[-1]


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    make_data_dir(tmp_path)
    register_system("last-turns", _factory)
    MADE.clear()
    yield tmp_path
    SYSTEMS.pop("last-turns", None)


def test_qa_answers_over_a_systems_items(root: Path) -> None:
    prompts: list[str] = []

    def reader(messages: list[dict[str, str]]) -> str:
        prompts.append(messages[-1]["content"])
        return "2022"

    opts = qa_options(root, limit=2, k=2, system=parse_system_spec("last-turns"))
    outcome = run_qa(opts, root / "run", llm=ScriptedLLM(reader), judge_llm=ScriptedLLM(judge), progress=False)  # type: ignore[arg-type]
    assert outcome.written == 2 and outcome.failed == 0
    [system] = MADE
    assert system.ingested == ["conv-a"]  # once per namespace
    log = read_qa_log(root / "run" / "log.jsonl")
    assert log.header.config["mode"] == "last-turns"
    assert log.header.config["retrieval"]["search_settings"] == {"last-turns": {"system": "last-turns"}}
    record = log.records[0]
    assert record.context["mode"] == "last-turns" and record.context["entries"] == 2  # k=2 items shown
    assert "turn/recall_all@2" in record.context["retrieval_scores"]  # type: ignore[operator]
    stamps = [line for line in prompts[0].splitlines() if line.startswith("[")]
    assert len(stamps) == 2


def test_qa_system_needs_retrieved_context_and_no_facts(root: Path) -> None:
    spec = parse_system_spec("last-turns")
    for changes, message in (
        ({"context": "full"}, "needs --context retrieved"),
        ({"facts": True}, "a --system context"),
    ):
        with pytest.raises(ConfigError, match=message):
            run_qa(
                replace(qa_options(root, system=spec), **changes),
                root / "bad",
                llm=ScriptedLLM(answerer({})),
                judge_llm=ScriptedLLM(judge),
                progress=False,
            )


def test_qa_cli_system_option(root: Path) -> None:
    env = {
        "MEMLANE_DATA": str(root / "data"),
        "MEMLANE_BENCH_CACHE": str(root / "cache"),
        "MEMLANE_BENCH_EMBEDDER": "hashing",
    }
    base = [
        "bench",
        "qa",
        "locomo",
        "--out",
        str(root / "r"),
        "--llm",
        "scripted",
        "--judge",
        "scripted",
        "--limit",
        "2",
    ]
    res = CliRunner().invoke(cli, [*base, "--system", "nosuch"], env=env)
    assert res.exit_code == 2 and "unknown system 'nosuch'" in res.stderr
    res = CliRunner().invoke(cli, [*base, "--system", "last-turns", "--quiet"], env=env)
    assert res.exit_code == 0, res.stderr


@pytest.mark.skipif(mem0_version() is None, reason="mem0ai is not installed (pip install 'memlane[mem0]')")
def test_qa_over_mem0(root: Path) -> None:
    opts = qa_options(root, limit=3, k=3, system=parse_system_spec("mem0"))
    outcome = run_qa(opts, root / "run", llm=ScriptedLLM(answerer({})), judge_llm=ScriptedLLM(judge), progress=False)
    assert outcome.written == 3 and outcome.failed == 0
    record = read_qa_log(root / "run" / "log.jsonl").records[0]
    assert record.context["mode"] == "mem0" and record.context["entries"] == 3
