"""Command group, shared options and error translation."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import import_module
from pathlib import Path
from typing import Any, TypeVar

import click

from memlane.core.calls import default_call_log_path, own_call_log
from memlane.core.errors import ConfigError, MemlaneError, NotFoundError, StoreError, ValidationError
from memlane.core.llm import LLM, CallLog, make_llm
from memlane.core.memory import Memory
from memlane.interfaces.cli.options import cli_settings, gathered, llm_log_option, setting_option
from memlane.settings import DEFAULT_STORE

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class LLMChoice:
    name: str
    log: Path | None = None
    base_url: str | None = None
    model: str | None = None


LLM_PARAMS = {"llm_name": "name", "llm_log": "log", "llm_base_url": "base_url", "llm_model": "model"}


def store_options(func: F) -> F:
    """``--store`` and ``--embedder``, each with its environment variable."""
    func = setting_option(
        "--embedder",
        setting="embedder",
        default="minilm",
        show_default=True,
        help="Embedder by name: minilm (offline ONNX), hashing (test fake), openai.",
    )(func)
    func = setting_option(
        "--store",
        setting="store",
        default=DEFAULT_STORE,
        show_default=True,
        type=str,
        help="Path of the SQLite store, or a postgresql://user:password@host:port/db URL. Only add, serve, mcp "
        "and init create a store; other commands exit 3 if there is none.",
    )(func)
    return func


def llm_options(func: F) -> F:
    """``--llm`` and its settings, each with its environment variable (the API key only from the env); the
    command gets them as one :class:`LLMChoice` argument ``llm``."""
    func = gathered(LLMChoice, LLM_PARAMS, "llm")(func)
    func = setting_option("--llm-model", setting="llm_model", default=None)(func)
    func = setting_option("--llm-base-url", setting="llm_base_url", default=None)(func)
    func = llm_log_option("SQLite file of the LLM call log and response cache. Default: STORE with .calls.db.")(func)
    func = setting_option(
        "--llm",
        "llm_name",
        setting="llm",
        default="openai",
        show_default=True,
        help="LLM provider: openai (MEMLANE_LLM_BASE_URL, MEMLANE_LLM_API_KEY, MEMLANE_LLM_MODEL) or scripted "
        "(offline fake).",
    )(func)
    return func


def call_log_path(store: str | Path, explicit: Path | None) -> Path | None:
    """The LLM call log's file: ``explicit`` (``--llm-log``), else ``MEMLANE_LLM_LOG``, else the store's
    default (beside a SQLite store; None for a PostgreSQL store, whose call log is a table of its own)."""
    return explicit or cli_settings().llm_log or default_call_log_path(store)


def _llm_overrides(llm: LLMChoice) -> dict[str, Any]:
    # The offline fake takes no server settings, even when the environment carries them.
    given = (("base_url", llm.base_url), ("model", llm.model)) if llm.name != "scripted" else ()
    return {k: v for k, v in given if v}


def build_llm(llm: LLMChoice, call_log: CallLog | None = None) -> LLM:
    """The LLM ``llm`` names: ``openai`` with the settings (MEMLANE_LLM_*) and the options over them; any
    other provider with the options only."""
    overrides = _llm_overrides(llm)
    if llm.name == "openai":
        return make_llm("openai", settings=cli_settings().llm_settings(**overrides), call_log=call_log)
    return make_llm(llm.name, call_log=call_log, **overrides)


def llm_config_problem(llm: LLMChoice) -> str | None:
    """Why ``llm`` cannot be built from the options and environment (a missing model or key, ...), or None."""
    try:
        model = build_llm(llm)
    except ConfigError as exc:
        return str(exc)
    close = getattr(model, "close", None)
    if callable(close):
        close()
    return None


def open_memory(
    store: str | Path,
    embedder: str,
    llm: LLMChoice | None = None,
    *,
    create: bool = False,
    server_timeout_s: float = 30.0,
    long_lived: bool = False,
) -> Memory:
    """The Memory a command works on, with the LLM ``llm`` and its call log. Without an LLM the call log is
    still known by its path (:func:`call_log_path`) and opened by the first delete that finds the file, so
    that every command that deletes (a user, a block, a retention sweep) deletes their LLM calls, whichever
    process made them. ``create``: make the store if there is none (add, serve, mcp); otherwise
    StoreNotFoundError (exit 3) and nothing is created (not even the call log), so a mistyped path is an
    error instead of an empty store. ``server_timeout_s``: how long an operation waits for a PostgreSQL
    server. ``long_lived`` (a server): searches may build approximate indexes in the background; a command
    that ends after one search builds none (it would not live to use one) and uses the saved index, which
    `memlane index build` makes."""
    settings = cli_settings()
    options = settings.memory_options()
    options["ann"] = replace(settings.ann_settings(), build=long_lived)
    path = call_log_path(store, llm.log if llm else None)
    # A store whose call log is a table of its own is opened first: the LLM writes into it.
    opened = (
        None
        if create and path is not None
        else Memory.open_store(store, create=create, server_timeout_s=server_timeout_s, ann=options["ann"])
    )
    log = None
    try:
        model = None
        if llm is not None:
            # the LLM writes it: a file made now if it is missing, or the store's own
            log = CallLog(path) if path is not None else own_call_log(opened)
            model = build_llm(llm, log)
        return Memory.open(
            opened if opened is not None else store,
            embedder=embedder,
            create=create,
            server_timeout_s=server_timeout_s,
            llm=model,
            call_log=log if log is not None else path,
            close_call_log=True,
            **options,
        )
    except BaseException:
        if log is not None:
            log.close()
        if opened is not None:
            opened.close()
        raise


class MemlaneGroup(click.Group):
    """Translates memlane's errors into a one-line message and an exit code (2: bad input, 3: not found, such
    as no store at the path given, 1: any other failure)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except NotFoundError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(3)
        except MemlaneError as exc:
            click.echo(f"error: {exc}", err=True)
            if isinstance(exc, StoreError) and exc.reason == "corrupt":
                click.echo(
                    "error: the store is corrupt (trying again will not help): `memlane check` lists the damage; "
                    "restore the store from a backup",
                    err=True,
                )
            sys.exit(1)


@click.group(cls=MemlaneGroup)
@click.version_option(package_name="memlane")
def cli() -> None:
    """memlane: persistent per-user memory for LLM agents.

    The store is --store (or MEMLANE_STORE; default memlane.db). Only add, serve, mcp and init create it:
    other commands exit 3 with "no store at PATH" when it does not exist.

    \b
    Example:
      echo '[{"role":"user","content":"I moved to Ghent."}]' | memlane add alice --time 2023-05-08
      memlane search alice "where do I live?" --json
    """


def show_progress_messages() -> None:
    """memlane's warnings (an LLM call being retried, an extraction job failing) go to stderr as one line
    each, so that a long wait says what it is waiting for."""
    logger = logging.getLogger("memlane")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("memlane: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def main() -> None:
    register_all()
    show_progress_messages()
    cli()


# The commands of an optional extra: the extra, the commands it brings, the modules that register them (they
# are imported only when the extra is installed; without it each command says which extra to install).
OPTIONAL_COMMANDS = (
    ("bench", ("bench", "datasets"), ("bench_cmds", "dataset_cmds", "qa_cmds")),
    ("server", ("serve", "mcp"), ("serve_cmds",)),
)


def register_all() -> None:
    from memlane.interfaces.cli.block_cmds import register as register_blocks
    from memlane.interfaces.cli.check_cmds import register as register_check
    from memlane.interfaces.cli.config_cmds import register as register_config
    from memlane.interfaces.cli.extract_cmds import register as register_extract
    from memlane.interfaces.cli.extras import missing, needs_extra
    from memlane.interfaces.cli.index_cmds import register as register_index
    from memlane.interfaces.cli.key_cmds import register as register_keys
    from memlane.interfaces.cli.memory_cmds import register as register_memory
    from memlane.interfaces.cli.prompt_cmds import register as register_prompts
    from memlane.interfaces.cli.retention_cmds import register as register_retention
    from memlane.interfaces.cli.session_cmds import register as register_sessions
    from memlane.interfaces.cli.shards_cmds import register as register_shards
    from memlane.interfaces.cli.user_cmds import register as register_users

    if "add" in cli.commands:
        return
    register_memory(cli)
    register_blocks(cli)
    register_sessions(cli)
    register_prompts(cli)
    register_users(cli)
    register_keys(cli)
    register_extract(cli)
    for extra, names, modules in OPTIONAL_COMMANDS:
        if absent := missing(extra):
            for name in names:
                cli.add_command(needs_extra(name, extra, absent))
        else:
            for module in modules:
                import_module(f"memlane.interfaces.cli.{module}").register(cli)
    register_retention(cli)
    register_config(cli)
    register_shards(cli)
    register_check(cli)
    register_index(cli)
