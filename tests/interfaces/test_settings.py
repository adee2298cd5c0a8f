"""memlane.settings: one reader of the environment, every variable documented, `memlane config show`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memlane.core.embedding.protocol import EmbedderConfig
from memlane.core.errors import ConfigError
from memlane.interfaces.cli.app import cli, register_all
from memlane.interfaces.cli.options import SettingOption, parse_ks
from memlane.settings import Settings, bench_cache_from_env, embedder_config_from_env, env_var, load, read_setting

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "memlane"
SETTINGS_MODULE = SRC / "settings.py"
# What reads the environment: os.environ / getenv, and click's own envvar= with a literal name.
READS = re.compile(r"os\.environ|getenv\(|environ\.get\(|envvar\s*=\s*[\"']")
# Writes of another library's own variables, which it reads at import (not memlane settings): allowed.
FOREIGN_WRITE = re.compile(r"^os\.environ(\[\"MEM0_[A-Z_]+\"\] = |\.setdefault\(\"MEM0_[A-Z_]+\")")


def _docs() -> str:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def _setting_options() -> list[tuple[str, SettingOption]]:
    register_all()
    found: list[tuple[str, SettingOption]] = []

    def walk(cmd: click.Command, path: str) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}")
        found.extend((path, p) for p in cmd.params if isinstance(p, SettingOption))

    walk(cli, "memlane")
    return found


def test_every_variable_and_option_is_documented() -> None:
    docs = _docs()
    missing = [env_var(name) for name in Settings.model_fields if f"`{env_var(name)}`" not in docs]
    assert missing == []
    options = _setting_options()
    assert len(options) > 60  # the walk found the commands' options
    undocumented = sorted({opt for _, p in options for opt in p.opts if not re.search(f"`{re.escape(opt)}[`/]", docs)})
    assert undocumented == []


def test_every_option_variable_is_a_setting() -> None:
    for where, option in _setting_options():
        assert option.setting in Settings.model_fields, where
        assert option.envvar == env_var(option.setting)


def test_no_memlane_variable_is_read_outside_the_settings_module() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SETTINGS_MODULE:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (
                READS.search(line)
                and not line.lstrip().startswith(("#", ">>>"))
                and not FOREIGN_WRITE.match(line.strip())
            ):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert offenders == []
    assert READS.search(SETTINGS_MODULE.read_text(encoding="utf-8"))  # the pattern does find reads


def test_load_reads_types_and_names_a_bad_value() -> None:
    s = load({"MEMLANE_PORT": "9001", "MEMLANE_INSECURE_DEV": "yes", "MEMLANE_DATA": "", "OTHER": "x"})
    assert (s.port, s.insecure_dev, s.data) == (9001, True, None)
    assert s.model_fields_set == {"port", "insecure_dev"}
    with pytest.raises(ConfigError, match=r"MEMLANE_PORT='eighty'"):
        load({"MEMLANE_PORT": "eighty"})
    # One setting is read alone: a bad unrelated variable does not fail it.
    assert read_setting("data", {"MEMLANE_DATA": "/d", "MEMLANE_PORT": "eighty"}) == Path("/d")


def test_llm_and_judge_settings_come_from_the_variables() -> None:
    s = load(
        {"MEMLANE_LLM_API_KEY": "k", "MEMLANE_LLM_MODEL": "m", "MEMLANE_LLM_TIMEOUT": "5", "MEMLANE_JUDGE_MODEL": "j"}
    )
    llm = s.llm_settings(base_url="http://x/v1")
    assert (llm.model, llm.api_key, llm.timeout_s, llm.base_url) == ("m", "k", 5.0, "http://x/v1")
    assert s.judge_settings().model == "j" and s.judge_settings().api_key == "k"
    with pytest.raises(ConfigError, match="MEMLANE_LLM_API_KEY"):
        load({}).llm_settings()


def test_config_show_says_where_each_value_came_from() -> None:
    register_all()
    env = {"MEMLANE_LLM_API_KEY": "very-secret-key", "MEMLANE_PORT": "9001", "MEMLANE_STORE": "env.db"}
    res = CliRunner().invoke(cli, ["config", "show", "--json", "--store", "opt.db"], env=env)
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert set(rows) == set(Settings.model_fields)
    assert rows["store"]["value"] == "opt.db" and rows["store"]["source"] == "option --store"
    assert rows["port"]["value"] == 9001 and rows["port"]["source"] == "env MEMLANE_PORT"
    assert rows["host"]["source"] == "default"
    assert rows["llm_api_key"]["secret"] and rows["llm_api_key"]["value"] == "********"
    assert "very-secret-key" not in res.stdout
    table = CliRunner().invoke(cli, ["config", "show"], env=env)
    assert table.exit_code == 0 and "very-secret-key" not in table.stdout
    assert re.search(r"MEMLANE_STORE\s+'env.db'\s+env MEMLANE_STORE", table.stdout)


def test_a_bad_variable_is_one_line_not_a_traceback() -> None:
    register_all()
    res = CliRunner().invoke(cli, ["config", "show"], env={"MEMLANE_PORT": "eighty"})
    assert res.exit_code == 1
    assert res.output.strip().startswith("error: MEMLANE_PORT='eighty'") and "Traceback" not in res.output


def test_an_option_takes_its_variable_through_the_settings(tmp_path: Path) -> None:
    register_all()
    store = tmp_path / "s.db"
    env = {"MEMLANE_STORE": str(store), "MEMLANE_EMBEDDER": "hashing"}
    res = CliRunner().invoke(cli, ["init"], env=env)
    assert res.exit_code == 0, res.output
    assert store.exists()


def test_the_one_k_parser() -> None:
    assert parse_ks("1,5,10") == (1, 5, 10)
    assert parse_ks("10 1,10") == (10, 1)
    for bad in ("", "a", "0,1", "-3"):
        with pytest.raises(click.BadParameter):
            parse_ks(bad)


def plausible(name: str) -> str:
    """A value of the right type for setting ``name``, as a user might export it."""
    annotation = str(Settings.model_fields[name].annotation)
    for kind, value in (("bool", "true"), ("int", "3"), ("float", "2.5"), ("Path", "/srv/memlane-elsewhere")):
        if kind in annotation:
            return value
    return f"exported-{name.replace('_', '-')}"


@pytest.fixture
def polluted(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every documented MEMLANE_* variable exported in this process with a plausible value."""
    docs = _docs()
    names = [name for name in Settings.model_fields if f"`{env_var(name)}`" in docs]
    exported = {env_var(name): plausible(name) for name in names}
    for key, value in exported.items():
        monkeypatch.setenv(key, value)
    assert load().cache_dir == Path("/srv/memlane-elsewhere")  # the process environment is really polluted
    return exported


def test_a_given_mapping_is_all_that_is_read(polluted: dict[str, str]) -> None:
    """Reading a given mapping never reads the process environment: each value comes from the mapping or
    the default, and a bad value is blamed on the variable that holds it."""
    assert len(polluted) == len(Settings.model_fields)
    empty = load({})
    assert empty.model_fields_set == set()
    assert {n: getattr(empty, n) for n in Settings.model_fields} == {
        n: f.default for n, f in Settings.model_fields.items()
    }
    assert load({"MEMLANE_CACHE_DIR": "/c"}).cache_dir == Path("/c") and load({}).cache_dir is None
    with pytest.raises(ConfigError, match=r"^MEMLANE_PORT='eighty'"):
        load({"MEMLANE_PORT": "eighty", "MEMLANE_DATA": "./data"})
    assert read_setting("data", {"MEMLANE_DATA": "./data"}) == Path("data")
    assert read_setting("cache_dir", {}) is None
    assert embedder_config_from_env({}) == EmbedderConfig()
    assert bench_cache_from_env({}) == Path.home() / ".cache" / "memlane" / "bench"


def test_one_setting_is_read_alone_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_PORT", "eighty")
    monkeypatch.setenv("MEMLANE_DATA", "./data")
    assert read_setting("data") == Path("data")
    with pytest.raises(ConfigError, match=r"^MEMLANE_PORT='eighty'"):
        load()


def test_the_bench_commands_the_settings_name_exist() -> None:
    """docs/configuration.md (and `memlane config show`) named `bench qa-sweep`, a command that is `bench sweep`."""
    register_all()
    bench = cli.commands["bench"]
    assert isinstance(bench, click.Group)
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8") + "\n".join(
        f.description or "" for f in Settings.model_fields.values()
    )
    named = set(re.findall(r"[`(]bench ([a-z][a-z0-9-]*)", text))
    assert len(named) > 5 and named <= set(bench.commands), named - set(bench.commands)


# What a developer might well have exported: values a command accepts, unlike plausible()'s placeholders.
EXPORTED = {
    "MEMLANE_EMBEDDER": "hashing",
    "MEMLANE_LLM": "scripted",
    "MEMLANE_EXTRACT": "async",
    "MEMLANE_PERSPECTIVE": "single",
    "MEMLANE_SESSION": "monday",
    "MEMLANE_ANN_THRESHOLD": "50",
    "MEMLANE_BENCH_LIMIT": "7",
    "MEMLANE_LLM_BASE_URL": "http://127.0.0.1:9/v1",
}


def test_the_tests_run_the_same_with_every_documented_variable_exported(tmp_path: Path) -> None:
    """`make test` with a shell that exports memlane's settings (MEMLANE_STORE, MEMLANE_EXTRACT=async, ...):
    the tests' conftest unexports them (all but MEMLANE_CACHE_DIR and MEMLANE_DATA, which the tests use
    as given), so commands run by tests that failed with them exported pass."""
    import importlib.util
    import os
    import subprocess
    import sys

    # By path: with several conftest modules, the one imported as ``conftest`` depends on test order.
    spec = importlib.util.spec_from_file_location("memlane_tests_root_conftest", ROOT / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    KEPT_SETTINGS = root_conftest.KEPT_SETTINGS

    assert not [env_var(n) for n in Settings.model_fields if n not in KEPT_SETTINGS and env_var(n) in os.environ]
    docs = _docs()
    exported = {
        env_var(name): str(tmp_path / name) if "Path" in str(field.annotation) else plausible(name)
        for name, field in Settings.model_fields.items()
        if f"`{env_var(name)}`" in docs and name not in KEPT_SETTINGS
    }
    exported.update(EXPORTED)
    exported["MEMLANE_STORE"] = str(tmp_path / "exported.db")
    tests = [
        "tests/interfaces/test_cli.py::test_add_search_delete_round_trip",
        "tests/interfaces/test_cli.py::test_list_says_how_many_more_blocks_follow",
        "tests/interfaces/test_settings.py::test_config_show_says_where_each_value_came_from",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env={**os.environ, **exported},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout[-3000:]
