"""`memlane serve` for real: uvicorn on a free loopback port with the extraction worker, driven by the
client, stopped by SIGTERM; and the refusals that come before anything listens."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner
from http_support import ADMIN_KEY, CLI, chat, wait_for_port

from memlane.client import Client
from memlane.client.errors import ConfigError
from memlane.core.memory import Memory
from memlane.interfaces.cli.app import cli, register_all
from memlane.interfaces.cli.serve_cmds import oidc_choice, register
from memlane.interfaces.serve import HttpService, run_http
from memlane.interfaces.wire.oidc import OidcSettings


def the_cli() -> object:
    register_all()
    if "serve" not in cli.commands:
        register(cli)
    return cli


@contextmanager
def served(env: dict[str, str], *args: str) -> Iterator[tuple[str, str, list[str]]]:
    """`memlane serve ARGS` on a free loopback port: (its URL, a key of the user alice, its log lines). Stopped
    with SIGTERM at the end, which must exit 0."""
    cmd = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", *args]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        base = f"http://127.0.0.1:{wait_for_port(proc, lines)}"
        with Client(base, ADMIN_KEY, timeout=10) as admin:
            assert admin.health().ok
            admin.create_user("alice")
            key = admin.create_key("alice").key
        yield base, key, lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_LLM")}
    return {**base, "MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": str(tmp_path / "served.db"),
            "MEMLANE_EMBEDDER": "hashing", **extra}  # fmt: skip


def test_serve_runs_the_api_and_the_workers_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = serve_env(tmp_path, MEMLANE_LLM="scripted")
    with served(env, "--workers", "2") as (base, key, lines), Client(base, key, timeout=10) as alice:
        added = alice.add(chat("I adopted a cat named Miso.", "Lovely!"), extract="async")
        deadline = time.monotonic() + 15
        while alice.queue_status().done < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [alice.get(b).extraction_status.value for b in added.block_ids] == ["done", "done"]
        assert alice.search("cat", k=1)[0].block.contexts  # the worker's facts are there
    assert any("Finished server process" in line for line in lines)


def test_serve_without_an_llm_starts_with_extraction_off(tmp_path: Path) -> None:
    # The default --workers 1 runs extraction, which needs an LLM that is not configured here.
    with served(serve_env(tmp_path)) as (base, key, lines), Client(base, key, timeout=10) as alice:
        alice.add(chat("I adopted a cat named Miso.", "Lovely!"))
        assert alice.search("cat", k=1)[0].block.message.startswith("user: I adopted")
        with pytest.raises(ConfigError, match="needs an LLM"):  # the server's 400 config_error
            alice.add(chat("And a dog.", "Nice!"), extract="sync")
        queued = alice.add(chat("And a bird.", "Nice!"), extract="async")
        assert queued.jobs_enqueued == 2 and alice.queue_status().queued == 2  # waiting for a worker
    notices = [line for line in lines if "extraction is off" in line]
    assert len(notices) == 1 and "MEMLANE_LLM_MODEL" in notices[0]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["serve", "--workers", "0"], {}, "MEMLANE_ADMIN_KEY"),
        (["serve", "--insecure-dev", "--host", "0.0.0.0", "--workers", "0"], {}, "loopback"),
        (["mcp"], {}, "--user"),
        (["mcp", "--transport", "http", "--user", "alice"], {}, "API key"),
    ],
)
def test_refusals_before_listening(tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    base = {"MEMLANE_STORE": str(tmp_path / "x.db"), "MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM_API_KEY": ""}
    res = CliRunner().invoke(the_cli(), args, env={"MEMLANE_ADMIN_KEY": "", **base, **env})  # type: ignore[arg-type]
    assert res.exit_code == 1, res.output
    assert message in res.stderr


def test_every_serve_option_reaches_the_http_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each field of HttpService (an option of `memlane serve`) reaches the service's options or settings
    under its own name, none dropped; the OIDC options unset on the command line are not checked."""
    import memlane.interfaces.http.server as server

    got: dict[str, Any] = {}
    monkeypatch.setattr(server, "serve", lambda memory, **kw: got.update(kw))
    oidc = oidc_choice(Path("jwks.json"), "https://idp.example", "", "preferred_username", "groups")
    assert oidc == OidcSettings(Path("jwks.json"), "https://idp.example", None, "preferred_username", "groups")
    service = HttpService("10.0.0.1", 1234, 3, "debug", False, 99, ("a.example",), 7.5, 11.0, 13.0, False, oidc, 17.0)
    run_http(cast(Memory, None), service, admin_key="key", insecure_dev=True)
    assert (got["admin_key"], got["insecure_dev"]) == ("key", True)
    for field in dataclasses.fields(service):
        holders = [o for o in (got["options"], got["settings"]) if hasattr(o, field.name)]
        assert [getattr(o, field.name) for o in holders] == [getattr(service, field.name)], field.name
